//! Finds `libmooncake_store.so` and tells rustc to link it, with an rpath so that tests,
//! examples and binaries run without `LD_LIBRARY_PATH`. In order:
//!
//! 1. `$MOONCAKE_STORE_LIB_DIR` — the directory holding the library (CMake sets it to the
//!    build tree's `libmc/` when it runs the test suite);
//! 2. `pkg-config --libs mooncake_store` (an installed library; honours `PKG_CONFIG_PATH`);
//! 3. `build/libmc/` of the source tree this crate lives in (a plain `make` build);
//! 4. otherwise only `-lmooncake_store`, for a library in the linker's default path.
use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

const LIB_FILE: &str = "libmooncake_store.so";

fn emit_dir(dir: &Path) {
    let dir = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
    println!("cargo:rustc-link-search=native={}", dir.display());
    println!("cargo:rustc-link-arg=-Wl,-rpath,{}", dir.display());
    // Exposed to dependents' build scripts as DEP_MOONCAKE_STORE_LIB_DIR.
    println!("cargo:lib_dir={}", dir.display());
}

/// The `-L` directories and `-l` names of `pkg-config --libs mooncake_store`, or None
/// when pkg-config is missing or does not know the package.
fn pkg_config() -> Option<(Vec<PathBuf>, Vec<String>)> {
    let out = Command::new(env::var("PKG_CONFIG").unwrap_or_else(|_| "pkg-config".into()))
        .args(["--libs", "mooncake_store"])
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8(out.stdout).ok()?;
    let mut dirs = Vec::new();
    let mut libs = Vec::new();
    for flag in text.split_whitespace() {
        if let Some(dir) = flag.strip_prefix("-L") {
            dirs.push(PathBuf::from(dir));
        } else if let Some(lib) = flag.strip_prefix("-l") {
            libs.push(lib.to_string());
        }
    }
    Some((dirs, libs))
}

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=MOONCAKE_STORE_LIB_DIR");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG");

    if let Some(dir) = env::var_os("MOONCAKE_STORE_LIB_DIR").filter(|d| !d.is_empty()) {
        let dir = PathBuf::from(dir);
        assert!(
            dir.join(LIB_FILE).exists(),
            "MOONCAKE_STORE_LIB_DIR={} holds no {LIB_FILE}; build the C side first \
             (cmake --build BUILD --target mooncake_store)",
            dir.display()
        );
        emit_dir(&dir);
        println!("cargo:rustc-link-lib=dylib=mooncake_store");
        return;
    }

    if let Some((dirs, libs)) = pkg_config() {
        for dir in &dirs {
            emit_dir(dir);
        }
        if libs.is_empty() {
            println!("cargo:rustc-link-lib=dylib=mooncake_store");
        }
        for lib in libs {
            println!("cargo:rustc-link-lib={lib}");
        }
        return;
    }

    let manifest = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let tree = manifest.join("../../build/libmc");
    if tree.join(LIB_FILE).exists() {
        emit_dir(&tree);
    }
    println!("cargo:rustc-link-lib=dylib=mooncake_store");
}
