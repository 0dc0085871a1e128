//! Replays the checked-in fuzzing inputs on stable Rust, every CI run:
//! each file of `fuzz/corpus/<target>/` and `fuzz/regressions/<target>/`
//! goes through the same `sluice::fuzzing` entry point the cargo-fuzz
//! target calls, which asserts the target's properties. A file that makes
//! it panic fails the test, naming the file. See fuzz/README.md.

use std::panic;
use std::path::{Path, PathBuf};

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz")
}

fn files(dir: &Path) -> Vec<PathBuf> {
    let Ok(rd) = std::fs::read_dir(dir) else { return Vec::new() };
    let mut v: Vec<PathBuf> = rd.filter_map(|e| e.ok()).map(|e| e.path()).filter(|p| p.is_file()).collect();
    v.sort();
    v
}

/// Every input of every target in `sluice::fuzzing::TARGETS` (so a new
/// target is replayed without touching this file), and no directory that
/// matches no target (a misspelt one would never be replayed).
/// The config targets load under `<tmp>/sluice-fuzz-config/`, made on
/// first use; the replay removes it when it ends, passed or failed.
struct RemoveFuzzPrefix;

impl Drop for RemoveFuzzPrefix {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(std::env::temp_dir().join("sluice-fuzz-config"));
    }
}

#[test]
fn every_checked_in_input_passes_its_target() {
    let _cleanup = RemoveFuzzPrefix;
    let mut failed = Vec::new();
    let mut counts = Vec::new();
    for (target, entry) in sluice::fuzzing::TARGETS {
        assert!(
            fuzz_dir().join("fuzz_targets").join(format!("{target}.rs")).is_file(),
            "fuzz/fuzz_targets/{target}.rs"
        );
        let corpus = files(&fuzz_dir().join("corpus").join(target));
        assert!(!corpus.is_empty(), "fuzz/corpus/{target}/ is empty or missing");
        let regressions = files(&fuzz_dir().join("regressions").join(target));
        for path in corpus.iter().chain(&regressions) {
            let data = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            if panic::catch_unwind(|| entry(&data)).is_err() {
                failed.push(path.display().to_string());
            }
        }
        counts.push(format!("{target}: {} + {}", corpus.len(), regressions.len()));
    }
    for dir in ["corpus", "regressions"] {
        let Ok(rd) = std::fs::read_dir(fuzz_dir().join(dir)) else { continue };
        for e in rd.filter_map(|e| e.ok()) {
            let name = e.file_name().to_string_lossy().into_owned();
            assert!(
                sluice::fuzzing::TARGETS.iter().any(|(t, _)| *t == name),
                "fuzz/{dir}/{name} matches no target in sluice::fuzzing::TARGETS"
            );
        }
    }
    println!("replayed (corpus + regressions): {}", counts.join(", "));
    assert!(failed.is_empty(), "{} input(s) fail (panic messages above):\n{}", failed.len(), failed.join("\n"));
}
