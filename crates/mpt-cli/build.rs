//! Records which mpt was built: `git describe` of the checkout and the
//! cargo profile, so that bench results name the code that made them
//! (`RunMeta`). Outside a git checkout (a source package) the commit is
//! "unknown".

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    if !out.status.success() {
        return None;
    }
    let s = String::from_utf8(out.stdout).ok()?;
    let s = s.trim();
    (!s.is_empty()).then(|| s.to_string())
}

fn main() {
    let describe = git(&["describe", "--always", "--dirty", "--tags", "--abbrev=12"])
        .unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=MPT_GIT_DESCRIBE={describe}");
    let profile = std::env::var("PROFILE").unwrap_or_else(|_| "unknown".into());
    println!("cargo:rustc-env=MPT_BUILD_PROFILE={profile}");
    // Rerun when the commit or the staged state changes, or this crate's
    // sources do (a dirty flag from edits elsewhere shows after the next
    // commit or `git add`).
    if let Some(dir) = git(&["rev-parse", "--git-dir"]) {
        println!("cargo:rerun-if-changed={dir}/HEAD");
        println!("cargo:rerun-if-changed={dir}/index");
    }
    if let Some(dir) = git(&["rev-parse", "--git-common-dir"]) {
        println!("cargo:rerun-if-changed={dir}/refs/heads");
    }
    println!("cargo:rerun-if-changed=src");
    println!("cargo:rerun-if-changed=build.rs");
}
