//! The release plan, checked without running it: `.github/workflows/release.yml` builds one archive
//! per platform, and `cargo binstall culturelens` must find each of them where the binstall
//! template of `native/Cargo.toml` says, with the binary where its `bin-dir` says. CI cannot run
//! the workflow, so this test renders both sides for every target and compares them, and checks
//! the toolchain against the workspace's `rust-version` and the platforms against the README.

use std::collections::BTreeMap;

use serde_yaml::Value;

fn repo_file(path: &str) -> String {
    let p = culturelens_testkit::root().join(path);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// binstall's `{ var }` templates (the variables this project uses).
fn render(template: &str, vars: &BTreeMap<&str, String>) -> String {
    let mut out = template.to_string();
    for (k, v) in vars {
        out = out.replace(&format!("{{ {k} }}"), v);
    }
    assert!(!out.contains('{'), "unrendered variable in {template:?} → {out:?}");
    out
}

/// The workflow's own `${{ matrix.X }}`/`${GITHUB_REF_NAME}` expressions for one matrix row.
fn expand(text: &str, row: &Value, tag: &str) -> String {
    let mut out = text.replace("${GITHUB_REF_NAME}", tag).replace("$GITHUB_REF_NAME", tag);
    for key in ["target", "archive", "os"] {
        out = out.replace(&format!("${{{{ matrix.{key} }}}}"), row[key].as_str().unwrap());
    }
    out
}

#[test]
fn every_release_archive_is_where_binstall_looks_and_holds_the_binary_where_it_says() {
    let workspace: toml::Table = repo_file("Cargo.toml").parse().unwrap();
    let package = &workspace["workspace"]["package"];
    let version = package["version"].as_str().unwrap().to_string();
    let repo = package["repository"].as_str().unwrap().to_string();
    let rust_version = package["rust-version"].as_str().unwrap();
    let native: toml::Table = repo_file("native/Cargo.toml").parse().unwrap();
    let binstall = &native["package"]["metadata"]["binstall"];

    let workflow: Value = serde_yaml::from_str(&repo_file(".github/workflows/release.yml")).unwrap();
    let build = &workflow["jobs"]["build"];
    let steps = build["steps"].as_sequence().unwrap();
    let step = |name: &str| -> String {
        steps
            .iter()
            .find(|s| s["name"].as_str() == Some(name))
            .unwrap_or_else(|| panic!("the build job has no step named {name:?}"))["run"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let toolchain = steps
        .iter()
        .find(|s| s["uses"].as_str().is_some_and(|u| u.starts_with("dtolnay/rust-toolchain")))
        .expect("a rust-toolchain step")["with"]["toolchain"]
        .as_str()
        .unwrap();
    assert_eq!(toolchain, rust_version, "the release toolchain is the workspace's rust-version");
    let build_cmd = step("build");
    assert!(
        build_cmd.contains("cargo build --locked --release -p culturelens --features wgpu"),
        "the release binary is the CLI with wgpu: {build_cmd}"
    );
    let package_cmd = step("package");

    let tag = format!("v{version}");
    let rows = build["strategy"]["matrix"]["include"].as_sequence().unwrap();
    let mut targets = Vec::new();
    for row in rows {
        let target = row["target"].as_str().unwrap().to_string();
        let windows = target.contains("windows");
        // What the workflow writes: `$name.$archive` with the binary at `$name/culturelens[.exe]`.
        let script = expand(&package_cmd, row, &tag);
        let name_line = script.lines().find(|l| l.trim_start().starts_with("name=")).expect("name= line");
        let name = name_line.trim().trim_start_matches("name=").trim_matches('"').to_string();
        let archive = format!("{name}.{}", row["archive"].as_str().unwrap());
        let copy = format!("cp \"target/{target}/release/culturelens$ext\" README.md \"$name/\"");
        assert!(script.contains(&copy), "the archive holds the binary built for {target}: {script}");
        let binary = format!("{name}/culturelens{}", if windows { ".exe" } else { "" });
        assert_eq!(row["archive"].as_str().unwrap(), if windows { "zip" } else { "tar.gz" });

        // Where binstall looks, from native/Cargo.toml (with the target's override, if any).
        let over = binstall.get("overrides").and_then(|o| o.get(target.as_str()));
        let pick = |key: &str| {
            over.and_then(|o| o.get(key)).or_else(|| binstall.get(key)).unwrap().as_str().unwrap().to_string()
        };
        let vars = BTreeMap::from([
            ("repo", repo.clone()),
            ("name", "culturelens".to_string()),
            ("version", version.clone()),
            ("target", target.clone()),
            ("bin", "culturelens".to_string()),
            ("binary-ext", if windows { ".exe".to_string() } else { String::new() }),
        ]);
        let url = render(&pick("pkg-url"), &vars);
        assert_eq!(url, format!("{repo}/releases/download/{tag}/{archive}"), "{target}");
        assert_eq!(render(&pick("bin-dir"), &vars), binary, "{target}");
        assert_eq!(pick("pkg-fmt"), if windows { "zip" } else { "tgz" }, "{target}");
        targets.push(target);
    }
    // Linux x86-64 and arm64, macOS, Windows (issue 29), and the README says so.
    for want in [
        "x86_64-unknown-linux-gnu",
        "aarch64-unknown-linux-gnu",
        "aarch64-apple-darwin",
        "x86_64-pc-windows-msvc",
    ] {
        assert!(targets.iter().any(|t| t == want), "no release archive for {want}: {targets:?}");
    }
    let readme = repo_file("README.md");
    for t in &targets {
        assert!(readme.contains(t.as_str()), "README.md does not list the release target {t}");
    }
}

/// The `wheels` job: one abi3 wheel of the Python package for each platform of a release archive,
/// built with the toolchain of the binaries and the maturin that scripts/test_python.sh pins,
/// manylinux_2_28 on Linux, and attached to the release with the archives.
#[test]
fn every_release_platform_gets_an_abi3_python_wheel() {
    let workflow: Value = serde_yaml::from_str(&repo_file(".github/workflows/release.yml")).unwrap();
    let jobs = &workflow["jobs"];
    let targets = |job: &str| -> Vec<String> {
        let rows = jobs[job]["strategy"]["matrix"]["include"].as_sequence().unwrap();
        rows.iter().map(|r| r["target"].as_str().unwrap().to_string()).collect()
    };
    assert_eq!(targets("wheels"), targets("build"), "a wheel for every release archive's platform");
    for row in jobs["wheels"]["strategy"]["matrix"]["include"].as_sequence().unwrap() {
        let linux = row["target"].as_str().unwrap().contains("linux");
        assert_eq!(row["manylinux"].as_str().unwrap(), if linux { "2_28" } else { "off" }, "{row:?}");
    }
    let steps = jobs["wheels"]["steps"].as_sequence().unwrap();
    let maturin = steps
        .iter()
        .find(|s| s["uses"].as_str().is_some_and(|u| u.starts_with("PyO3/maturin-action@")))
        .expect("a maturin-action step");
    let with = &maturin["with"];
    let pinned = repo_file("scripts/test_python.sh");
    let version = with["maturin-version"].as_str().unwrap();
    assert!(pinned.contains(&format!("maturin=={version}")), "maturin {version} is the one CI tests with");
    let build_steps = jobs["build"]["steps"].as_sequence().unwrap();
    let toolchain = build_steps
        .iter()
        .find(|s| s["uses"].as_str().is_some_and(|u| u.starts_with("dtolnay/rust-toolchain")))
        .unwrap()["with"]["toolchain"]
        .as_str()
        .unwrap();
    assert_eq!(with["rust-toolchain"].as_str(), Some(toolchain));
    let args = with["args"].as_str().unwrap();
    for want in ["--release", "--locked", "-m crates/culturelens-py/Cargo.toml"] {
        assert!(args.contains(want), "wheel args {args:?} lack {want}");
    }
    // The wheel has the release binary's devices: a binary built with wgpu, a wheel with `gpu`
    // (the package's feature for Burn's wgpu backend).
    let cargo_build = build_steps
        .iter()
        .filter_map(|s| s["run"].as_str())
        .find(|r| r.contains("cargo build") && r.contains("-p culturelens "))
        .expect("the binaries' cargo build step");
    assert!(cargo_build.contains("--features wgpu"), "{cargo_build}");
    assert!(args.contains("--features gpu"), "wheel args {args:?} lack --features gpu");
    // abi3: one wheel serves every CPython >= 3.9.
    let py: toml::Table = repo_file("crates/culturelens-py/Cargo.toml").parse().unwrap();
    let features = py["dependencies"]["pyo3"]["features"].as_array().unwrap();
    assert!(features.iter().any(|f| f.as_str() == Some("abi3-py39")), "{features:?}");
    let needs: Vec<&str> =
        jobs["publish"]["needs"].as_sequence().unwrap().iter().map(|n| n.as_str().unwrap()).collect();
    assert_eq!(needs, ["build", "wheels"]);
}
