//! The `unwrap`, `expect`, `panic!` and `unreachable!` left in the source of every crate are
//! exactly those `fuzz/panic_sites.txt` lists, each with why no input reaches it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

const CRATES: [&str; 5] = ["sim", "calibrate", "reports", "testbed", "fuzz"];
const SITES: [&str; 6] = [
    ".unwrap()",
    ".expect(",
    "panic!(",
    "unreachable!(",
    "unimplemented!(",
    "todo!(",
];

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// Panic sites of one file before its test module, comment lines left out (a file that is a
/// test module, `#![cfg(test)]`, has none).
fn sites(text: &str) -> usize {
    text.lines()
        .take_while(|l| !l.starts_with("#[cfg(test)]") && !l.starts_with("#![cfg(test)]"))
        .filter(|l| !l.trim_start().starts_with("//"))
        .map(|l| SITES.iter().map(|s| l.matches(s).count()).sum::<usize>())
        .sum()
}

#[test]
fn every_panic_site_in_the_source_is_listed_with_its_reason() {
    let root = repo();
    let mut found: BTreeMap<String, usize> = BTreeMap::new();
    for c in CRATES {
        let mut files = Vec::new();
        rust_files(&root.join(c).join("src"), &mut files);
        for f in files {
            // The fuzz harness's own source is not reachable from dtsim's inputs.
            if c == "fuzz" {
                continue;
            }
            let n = sites(&std::fs::read_to_string(&f).unwrap());
            if n > 0 {
                let rel = f.strip_prefix(&root).unwrap().display().to_string();
                found.insert(rel, n);
            }
        }
    }
    let list = std::fs::read_to_string(root.join("fuzz/panic_sites.txt")).unwrap();
    let mut listed: BTreeMap<String, usize> = BTreeMap::new();
    for line in list
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
    {
        let mut w = line.split_whitespace();
        let (Some(file), Some(n)) = (w.next(), w.next()) else {
            panic!("fuzz/panic_sites.txt: {line:?}: `file count reason`");
        };
        let reason: Vec<&str> = w.collect();
        assert!(
            !reason.is_empty(),
            "fuzz/panic_sites.txt: {file}: give the reason"
        );
        listed.insert(file.to_string(), n.parse().unwrap());
    }
    assert_eq!(
        found, listed,
        "panic sites in the source (left) differ from fuzz/panic_sites.txt (right): \
         remove the new ones, or list each with why no input reaches it"
    );
}
