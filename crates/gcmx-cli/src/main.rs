//! `gcmx`: encrypt and decrypt files in Google Tink's streaming AEAD format (AES-GCM-HKDF).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use clap::{Args, Parser, Subcommand};
use gcmx_cli::{Direction, Error, ErrorKind, RunOptions, Sink, Source};
use gcmx_stream::{KeySize, Keyset};

const EXAMPLES_AND_STATUS: &str = "\
Examples:
  gcmx keygen --out key.json
  gcmx encrypt --keyset key.json --aad \"backup 1\" big.tar big.tar.tink
  gcmx decrypt --keyset key.json --aad \"backup 1\" big.tar.tink big.tar.out
  tar c dir | gcmx encrypt --keyset key.json - dir.tar.tink
  gcmx decrypt --keyset key.json dir.tar.tink - | tar x
  gcmx demo

An OUTPUT file appears only when complete; any failure or catchable signal leaves nothing
beside it. --force replaces an existing regular file only: a symbolic link, FIFO, socket
or device at OUTPUT is refused (to write into one, give - and redirect standard output).

Exit status:
  0      success (the output is in place)
  1      failure: unreadable or malformed input or keyset, authentication failed, a read
         or write error; no OUTPUT file was put in place
  2      bad command line: unknown option or backend, bad --aad-hex, an OUTPUT that
         exists (without --force) or is not a regular file, an OUTPUT that is the
         keyset file or (decrypting) the INPUT file, even with --force, a bad size
  128+N  stopped by signal N (130: Ctrl-C, 143: SIGTERM); no OUTPUT file was put in place";

/// `gcmx --version`: the release and whether this build has the GPU backend.
#[cfg(feature = "cuda")]
const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (GPU backend: CUDA, the driver loaded at run time)"
);
#[cfg(not(feature = "cuda"))]
const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (CPU only: built without the `cuda` feature)"
);

#[derive(Parser)]
#[command(
    name = "gcmx",
    version = VERSION,
    about = "Encrypt and decrypt files in Google Tink's streaming AEAD format (AES-GCM-HKDF) with the gcmx AES-GCM engine",
    after_help = EXAMPLES_AND_STATUS
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Make a new Tink keyset with one AES-GCM-HKDF streaming key (file mode 0600).
    #[command(after_help = "\
Examples:
  gcmx keygen --out key.json
  gcmx keygen --aes128 --segment-size 64M --out gpu-key.json
  gcmx keygen --out -          # to standard output

The keyset is the secret: anyone who has it can decrypt. Exit status: 0 success, 1 failure,
2 bad command line or an existing --out file.")]
    Keygen {
        /// AES-128 (16-byte key and derived keys) instead of AES-256.
        #[arg(long)]
        aes128: bool,
        /// Ciphertext segment size in bytes (suffixes K, M, G allowed); larger segments suit GPUs.
        #[arg(long, value_name = "BYTES", default_value = "1MiB")]
        segment_size: String,
        /// Where to write the keyset (`-` for standard output); an existing file is never
        /// overwritten.
        #[arg(long, value_name = "KEYSET")]
        out: PathBuf,
    },
    /// Encrypt INPUT into OUTPUT (`-` for standard input or output).
    #[command(after_help = EXAMPLES_AND_STATUS)]
    Encrypt(CryptArgs),
    /// Decrypt INPUT into OUTPUT (`-` for standard input or output).
    #[command(after_help = EXAMPLES_AND_STATUS)]
    Decrypt(CryptArgs),
    /// Check every backend on a sample file, and show the library's in-memory throughput and
    /// the file-to-file throughput beside a plain copy of the same file.
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
    /// Associated data, as text (UTF-8 bytes); decrypting needs the same value.
    #[arg(long, value_name = "TEXT", conflicts_with = "aad_hex")]
    aad: Option<String>,
    /// Associated data, as hex digits.
    #[arg(long, value_name = "HEX")]
    aad_hex: Option<String>,
    /// Crypto backend: auto (the library's choice), cpu, cpu-parallel or cuda.
    #[arg(long, value_name = "BACKEND", default_value = "auto")]
    backend: String,
    /// Replace OUTPUT if it is an existing regular file (never a link, FIFO or device).
    #[arg(long)]
    force: bool,
    /// Flush OUTPUT to disk before exiting (survives a crash; costs the disk's write speed).
    #[arg(long)]
    fsync: bool,
    /// No progress bar and no summary line.
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
    let window_bytes = window_from_env()?;
    let (keyset, keyset_file) = gcmx_cli::keyfile::read(&a.keyset)?;
    let opts = RunOptions {
        backend,
        force: a.force,
        quiet: a.quiet,
        fsync: a.fsync,
        window_bytes,
        keyset_file: Some(keyset_file),
    };
    let dst = Sink::from_arg(&a.output);
    let t = Instant::now();
    let stats = gcmx_cli::files::run(dir, &keyset, &aad, &Source::from_arg(&a.input), &dst, &opts)?;
    if !a.quiet {
        let line = gcmx_cli::files::summary(dir, &stats, t.elapsed().as_secs_f64(), &dst);
        eprintln!("gcmx: {line}");
    }
    Ok(())
}

/// `GCMX_WINDOW` (bytes, suffixes allowed) overrides the batch size, for tuning.
fn window_from_env() -> Result<usize, Error> {
    let Ok(v) = std::env::var("GCMX_WINDOW") else {
        return Ok(0);
    };
    let max = gcmx_stream::MAX_WINDOW_BYTES;
    let n = gcmx_cli::parse_size(&v)
        .map_err(|e| Error::new(ErrorKind::Usage, format!("GCMX_WINDOW: {e}")))?;
    match usize::try_from(n) {
        Ok(n) if n <= max => Ok(n),
        _ => Err(Error::new(
            ErrorKind::Usage,
            format!(
                "GCMX_WINDOW={v} is too large (at most {max} bytes, {} MiB)",
                max >> 20
            ),
        )),
    }
}

fn keygen(aes128: bool, segment_size: &str, out: &Path) -> Result<(), Error> {
    let size = gcmx_cli::parse_size(segment_size)?;
    let max = gcmx_stream::MAX_SEGMENT_SIZE;
    let size = u32::try_from(size)
        .ok()
        .filter(|&s| s <= max)
        .ok_or_else(|| {
            Error::new(
                ErrorKind::Usage,
                format!("segment size {size} is too large (at most {max})"),
            )
        })?;
    // A bad size is a usage error here, not a bad keyset.
    let key_size = if aes128 {
        KeySize::Aes128
    } else {
        KeySize::Aes256
    };
    let keyset = Keyset::generate(key_size, size)
        .map_err(|e| Error::new(ErrorKind::Usage, e.to_string()))?;
    let to_stdout = out.as_os_str() == "-";
    if to_stdout {
        let json = keyset.to_json();
        let mut stdout = std::io::stdout().lock();
        stdout
            .write_all(json.as_bytes())
            .and_then(|()| stdout.flush())
            .map_err(|e| Error::io("cannot write the keyset", e))?;
    } else {
        gcmx_cli::keyfile::write_new(&keyset, out)?;
    }
    let k = keyset.primary();
    eprintln!(
        "gcmx: wrote a new AES-{} keyset (key id {}, {} segments) to {}; keep it secret: anyone who has it can decrypt",
        k.derived_key_size() * 8,
        k.key_id(),
        human_size(k.segment_size()),
        if to_stdout {
            "standard output".to_string()
        } else {
            out.display().to_string()
        }
    );
    Ok(())
}

fn human_size(n: u32) -> String {
    match n {
        n if n >= 1 << 20 && n % (1 << 20) == 0 => format!("{} MiB", n >> 20),
        n if n >= 1 << 10 && n % (1 << 10) == 0 => format!("{} KiB", n >> 10),
        n => format!("{n}-byte"),
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let one_output = !matches!(cli.command, Command::Demo { .. });
    let result = gcmx_cli::signals::install(one_output).and_then(|()| match &cli.command {
        Command::Keygen {
            aes128,
            segment_size,
            out,
        } => keygen(*aes128, segment_size, out),
        Command::Encrypt(a) => crypt(Direction::Encrypt, a),
        Command::Decrypt(a) => crypt(Direction::Decrypt, a),
        Command::Demo { mib } => gcmx_cli::demo::run(&mut std::io::stdout(), *mib),
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("gcmx: error: {e}");
            match e.kind() {
                ErrorKind::Usage => ExitCode::from(2),
                _ => ExitCode::FAILURE,
            }
        }
    }
}
