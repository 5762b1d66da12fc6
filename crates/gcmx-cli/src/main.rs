//! `gcmx`: encrypt and decrypt files in Google Tink's streaming AEAD format (AES-GCM-HKDF).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use gcmx_cli::{Direction, Error, Keyset, RunOptions, Sink, Source, StreamingKey};

#[derive(Parser)]
#[command(
    name = "gcmx",
    version,
    about = "Encrypt and decrypt files in Google Tink's streaming AEAD format (AES-GCM-HKDF) with the gcmx AES-GCM engine"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Make a new Tink keyset with one AES-GCM-HKDF streaming key (file mode 0600).
    Keygen {
        /// AES-128 (16-byte key and derived keys) instead of AES-256.
        #[arg(long)]
        aes128: bool,
        /// Ciphertext segment size in bytes (suffixes K, M, G allowed); larger segments suit GPUs.
        #[arg(long, value_name = "BYTES", default_value = "1MiB")]
        segment_size: String,
        /// Where to write the keyset; never overwritten.
        #[arg(long, value_name = "KEYSET")]
        out: PathBuf,
    },
    /// Encrypt INPUT into OUTPUT (`-` for standard input or output).
    Encrypt(CryptArgs),
    /// Decrypt INPUT into OUTPUT (`-` for standard input or output).
    Decrypt(CryptArgs),
    /// Encrypt, decrypt and check a sample file with every backend, and print their throughput.
    Demo {
        /// Size of the sample in MiB.
        #[arg(long, value_name = "MIB", default_value_t = 64)]
        mib: u64,
    },
}

#[derive(Args)]
struct CryptArgs {
    /// Tink cleartext JSON keyset.
    #[arg(long, value_name = "KEYSET")]
    keyset: PathBuf,
    /// Associated data, as text (UTF-8 bytes).
    #[arg(long, value_name = "TEXT", conflicts_with = "aad_hex")]
    aad: Option<String>,
    /// Associated data, as hex digits.
    #[arg(long, value_name = "HEX")]
    aad_hex: Option<String>,
    /// Crypto backend: auto, cpu, cpu-parallel or cuda.
    #[arg(long, value_name = "BACKEND", default_value = "auto")]
    backend: String,
    /// Replace OUTPUT if it exists.
    #[arg(long)]
    force: bool,
    /// Flush OUTPUT to disk before exiting (survives a crash; costs the disk's write speed).
    #[arg(long)]
    fsync: bool,
    /// No progress bar.
    #[arg(long, short)]
    quiet: bool,
    /// Input file, or `-` for standard input.
    input: PathBuf,
    /// Output file, or `-` for standard output.
    output: PathBuf,
}

fn crypt(dir: Direction, a: &CryptArgs) -> Result<(), Error> {
    let backend = gcmx_cli::parse_backend(&a.backend)?;
    let aad = match (&a.aad, &a.aad_hex) {
        (Some(t), _) => t.as_bytes().to_vec(),
        (None, Some(h)) => gcmx_cli::parse_hex(h)?,
        (None, None) => Vec::new(),
    };
    let keyset = Keyset::read(&a.keyset)?;
    let opts = RunOptions {
        backend,
        force: a.force,
        quiet: a.quiet,
        fsync: a.fsync,
        window_bytes: window_from_env()?,
    };
    gcmx_cli::files::run(
        dir,
        &keyset,
        &aad,
        &Source::from_arg(&a.input),
        &Sink::from_arg(&a.output),
        &opts,
    )?;
    Ok(())
}

/// `GCMX_WINDOW` (bytes, suffixes allowed) overrides the batch size, for tuning.
fn window_from_env() -> Result<usize, Error> {
    match std::env::var("GCMX_WINDOW") {
        Ok(v) => {
            let n = gcmx_cli::parse_size(&v)?;
            usize::try_from(n)
                .map_err(|_| Error::new(gcmx_cli::ErrorKind::Usage, "GCMX_WINDOW too large"))
        }
        Err(_) => Ok(0),
    }
}

fn keygen(aes128: bool, segment_size: &str, out: &std::path::Path) -> Result<(), Error> {
    let size = gcmx_cli::parse_size(segment_size)?;
    let size = u32::try_from(size).map_err(|_| {
        Error::new(
            gcmx_cli::ErrorKind::Usage,
            format!(
                "segment size {size} is too large (at most {})",
                gcmx_cli::keyset::MAX_SEGMENT_SIZE
            ),
        )
    })?;
    let key = StreamingKey::generate(aes128, size)?;
    Keyset::single(key).write_new(out)
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    gcmx_cli::files::install_interrupt_cleanup();
    let result = match &cli.command {
        Command::Keygen {
            aes128,
            segment_size,
            out,
        } => keygen(*aes128, segment_size, out),
        Command::Encrypt(a) => crypt(Direction::Encrypt, a),
        Command::Decrypt(a) => crypt(Direction::Decrypt, a),
        Command::Demo { mib } => gcmx_cli::demo::run(&mut std::io::stdout(), *mib),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("gcmx: error: {e}");
            ExitCode::FAILURE
        }
    }
}
