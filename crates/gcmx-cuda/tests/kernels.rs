//! The fatbin in `kernels/` is the one its build record describes, and the record is what the CUDA
//! sources in `cuda/` and build.rs's nvcc flags give: the check build.rs makes before it embeds the
//! fatbin, run here without the `cuda` feature too, so that a stale fatbin cannot be committed. (That
//! the same sources and flags give the same bytes is `scripts/build-kernels.sh --check`, which needs nvcc.)

#[path = "../build/record.rs"]
#[allow(dead_code)]
mod record;

use std::path::Path;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn shipped_fatbin_matches_its_record_and_sources() {
    let r = record::check(&root().join("kernels"), &root().join("cuda"))
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(r.have_clmad(), "the shipped kernels must use clmad");
    let (major, minor) = r.nvcc.split_once('.').expect("nvcc release");
    let v = (major.parse::<u32>().unwrap(), minor.parse::<u32>().unwrap());
    assert!(v >= (13, 3), "built by nvcc {} (clmad needs 13.3)", r.nvcc);
    assert!(r.sources.iter().any(|(n, _)| n == record::MAIN_SOURCE));
}

#[test]
fn a_changed_added_or_removed_source_is_refused() {
    let tmp = std::env::temp_dir().join(format!("gcmx-kernels-{}", std::process::id()));
    let cuda = tmp.join("cuda");
    std::fs::create_dir_all(&cuda).unwrap();
    for e in std::fs::read_dir(root().join("cuda")).unwrap().flatten() {
        if e.path().is_file() {
            std::fs::copy(e.path(), cuda.join(e.file_name())).unwrap();
        }
    }
    let kernels = root().join("kernels");
    assert!(record::check(&kernels, &cuda).is_ok());

    let header = cuda.join("gcmx_abi.h");
    let original = std::fs::read(&header).unwrap();
    let mut changed = original.clone();
    changed.extend_from_slice(b"\n/* one more line */\n");
    std::fs::write(&header, &changed).unwrap();
    let e = record::check(&kernels, &cuda).unwrap_err();
    assert!(e.contains("gcmx_abi.h changed"), "{e}");
    std::fs::write(&header, &original).unwrap();

    std::fs::write(cuda.join("extra.cuh"), b"// new\n").unwrap();
    let e = record::check(&kernels, &cuda).unwrap_err();
    assert!(e.contains("extra.cuh is new"), "{e}");
    std::fs::remove_file(cuda.join("extra.cuh")).unwrap();

    std::fs::remove_file(cuda.join("bandwidth.cu")).unwrap();
    let e = record::check(&kernels, &cuda).unwrap_err();
    assert!(e.contains("bandwidth.cu is gone"), "{e}");
    let _ = std::fs::remove_dir_all(&tmp);
}

#[test]
fn a_record_survives_its_own_rendering() {
    let text = std::fs::read_to_string(root().join("kernels/gcmx.fatbin.record")).unwrap();
    let r = record::Record::parse(&text).expect("a record");
    assert_eq!(record::Record::parse(&r.render()), Some(r));
    assert_eq!(
        record::Record::parse("nvcc 13.5\nflags -O3\n"),
        None,
        "no fatbin line"
    );
    assert_eq!(record::Record::parse("nvcc 13.5\nsomething else\n"), None);
}
