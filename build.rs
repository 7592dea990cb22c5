//! Build facts for `pgdbg --version`: the git commit the binary was built
//! from (`PGDBG_COMMIT` in the environment wins, e.g. for a build from a
//! tarball; "unknown" outside git) and the target triple.

use std::path::PathBuf;
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    let s = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (out.status.success() && !s.is_empty()).then_some(s)
}

fn main() {
    println!("cargo::rerun-if-env-changed=PGDBG_COMMIT");
    let commit = match std::env::var("PGDBG_COMMIT") {
        Ok(c) if !c.is_empty() => c,
        _ => git(&["rev-parse", "--short=12", "HEAD"]).unwrap_or_else(|| "unknown".into()),
    };
    // Built again when HEAD moves: HEAD itself, the branch it names (in
    // the common directory for a worktree's branch) and packed-refs.
    if let (Some(dir), Some(common)) = (
        git(&["rev-parse", "--git-dir"]),
        git(&["rev-parse", "--git-common-dir"]),
    ) {
        let (dir, common) = (PathBuf::from(dir), PathBuf::from(common));
        let mut watch = vec![dir.join("HEAD"), common.join("packed-refs")];
        if let Some(r) = git(&["symbolic-ref", "-q", "HEAD"]) {
            watch.push(common.join(r));
        }
        for p in watch.iter().filter(|p| p.exists()) {
            println!("cargo::rerun-if-changed={}", p.display());
        }
    }
    println!("cargo::rustc-env=PGDBG_BUILD_COMMIT={commit}");
    println!(
        "cargo::rustc-env=PGDBG_BUILD_TARGET={}",
        std::env::var("TARGET").unwrap_or_default()
    );
}
