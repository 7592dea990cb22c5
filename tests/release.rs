//! What `scripts/release` makes: one statically linked executable (no
//! `PT_INTERP`, no `DT_NEEDED`) that runs in a root directory holding
//! nothing but itself, attaches there to a backend of the 15 build and
//! gets DWARF from debuginfod by host name; a `.deb` that installs into a
//! fresh root with its manual pages and completions; a tarball and sums.
//! And `pgdbg --version`: version, commit, target, the packs built in.
//!
//! The static executable is a second build of every crate (cached in
//! target/static afterwards; see `dist`), so the tests that need it run only
//! with PGDBG_RELEASE_TESTS=1.

use common::debuginfod::*;
use common::*;
use object::elf;
use object::read::elf::{Dyn, ElfFile64, ProgramHeader};
use pgdbg_testbed as common;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

struct Dist {
    dir: PathBuf,
    /// The static executable as `scripts/release` put it into `dir`.
    bin: PathBuf,
    version: &'static str,
}

/// `scripts/release --out DIR`, once per run of this file.  From an empty
/// target/static every dependency is built again with other flags: 3 min
/// 54 s of CPU (16 minutes' wall time at nice 19 beside other builds on
/// 2 CPUs); after a change to pgdbg alone about 1 min 45 s of CPU; under
/// a second when nothing changed (the five tests then take 26 s).
fn dist() -> Option<&'static Dist> {
    if std::env::var_os("PGDBG_RELEASE_TESTS").is_none() {
        eprintln!(
            "skipped: set PGDBG_RELEASE_TESTS=1 to build the static executable (scripts/release; \
             minutes the first time, cached in target/static) and test it"
        );
        return None;
    }
    static DIST: OnceLock<Dist> = OnceLock::new();
    Some(DIST.get_or_init(|| {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("release-dist");
        let _ = std::fs::remove_dir_all(&dir);
        let st = Command::new(repo().join("scripts/release"))
            .arg("--out")
            .arg(&dir)
            .stdout(Stdio::inherit())
            .stderr(Stdio::inherit())
            .status()
            .expect("run scripts/release");
        assert!(st.success(), "scripts/release failed");
        let version = env!("CARGO_PKG_VERSION");
        Dist {
            bin: dir.join(format!("pgdbg-{version}-x86_64-linux")),
            dir,
            version,
        }
    }))
}

/// A scratch directory under target/tmp, empty.
fn scratch(name: &str) -> PathBuf {
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// `args` run with `root` as the root directory, the host's /proc and
/// /dev/null (as on any system) bound into it in a mount namespace of its
/// own (gone with the command), with only `env` and PATH (for unshare,
/// mount and chroot) in the environment.
fn chroot_command(root: &Path, env: &[(&str, &str)], args: &[&str]) -> Command {
    std::fs::create_dir_all(root.join("proc")).unwrap();
    std::fs::create_dir_all(root.join("dev")).unwrap();
    std::fs::write(root.join("dev/null"), "").unwrap();
    let mut c = Command::new("unshare");
    c.args(["--mount", "--propagation", "private", "sh", "-c"])
        .arg(
            r#"root="$1"; shift; mount --rbind /proc "$root/proc" && mount --bind /dev/null "$root/dev/null" && exec chroot "$root" "$@""#,
        )
        .arg("sh")
        .arg(root)
        .args(args)
        .env_clear()
        .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
        .envs(env.iter().copied());
    c.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

fn output(mut c: Command) -> (i32, String, String) {
    let o = c.output().expect("run unshare/chroot");
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// A root holding the static executable at /pgdbg and nothing else.
fn root_with_only_pgdbg(d: &Dist, name: &str) -> PathBuf {
    let root = scratch(name);
    std::fs::copy(&d.bin, root.join("pgdbg")).unwrap();
    root
}

/// The commit the test binary's pgdbg was built from, as build.rs names it.
fn head_commit() -> String {
    Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .current_dir(repo())
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|| "unknown".into())
}

/// What `--version` must say, for a build linked `linked`.
fn assert_version_text(out: &str, linked: &str) {
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines[0],
        format!("pgdbg {}", env!("CARGO_PKG_VERSION")),
        "{out}"
    );
    let commit = std::env::var("PGDBG_COMMIT")
        .ok()
        .filter(|c| !c.is_empty())
        .unwrap_or_else(head_commit);
    assert_eq!(lines[1], format!("commit: {commit}"), "{out}");
    assert_eq!(
        lines[2],
        format!("target: x86_64-unknown-linux-gnu, {linked}"),
        "{out}"
    );
    assert_eq!(
        lines[3], "PostgreSQL majors: 13, 14, 15, 16, 17, 18",
        "{out}"
    );
    assert_eq!(
        lines[4],
        "layout packs built in (for binaries without debug info):"
    );
    for (i, m) in (13..=18).enumerate() {
        let pack: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(repo().join(format!("symbols/pg{m}.json"))).unwrap(),
        )
        .unwrap();
        let want = format!(
            "  {m}: symbols/pg{m}.json, from {}",
            pack["version"].as_str().unwrap()
        );
        assert_eq!(lines[5 + i], want, "{out}");
    }
    assert_eq!(lines.len(), 11, "{out}");
}

#[test]
fn version_names_commit_target_and_packs() {
    let (code, out, err) = pgdbg(&["--version"]);
    assert_eq!(code, 0, "{err}");
    assert_version_text(&out, "dynamically linked");
    // -V: the short form, one line
    let (code, out, _) = pgdbg(&["-V"]);
    assert_eq!(code, 0);
    assert_eq!(out, format!("pgdbg {}\n", env!("CARGO_PKG_VERSION")));
}

/// No dynamic loader asked for, no shared library needed.
#[test]
fn release_executable_is_static() {
    let Some(d) = dist() else { return };
    let data = std::fs::read(&d.bin).unwrap();
    let file = ElfFile64::<object::Endianness>::parse(&*data).unwrap();
    let endian = file.endian();
    let mut needed = 0;
    for ph in file.elf_program_headers() {
        assert_ne!(
            ph.p_type(endian),
            elf::PT_INTERP,
            "PT_INTERP in {:?}",
            d.bin
        );
        if let Some(dynamic) = ph.dynamic(endian, &*data).unwrap() {
            needed += dynamic
                .iter()
                .filter(|e| e.d_tag(endian) == elf::DT_NEEDED)
                .count();
        }
    }
    assert_eq!(needed, 0, "DT_NEEDED entries in {:?}", d.bin);
    let (code, out, err) = output({
        let mut c = Command::new(&d.bin);
        c.arg("--version");
        c
    });
    assert_eq!(code, 0, "{err}");
    assert_version_text(&out, "statically linked");
}

/// In a root directory that holds only the executable (and /proc): the
/// version, then `info` and `plancache` on a backend of the 15 build,
/// which is left as found.
#[test]
fn release_executable_alone_attaches_to_15() {
    let Some(d) = dist() else { return };
    let root = root_with_only_pgdbg(d, "release-chroot-attach");
    let (code, out, err) = output(chroot_command(&root, &[], &["/pgdbg", "--version"]));
    assert_eq!(code, 0, "{out}\n{err}");
    assert_version_text(&out, "statically linked");

    let cl = Cluster::start(15);
    let mut a = cl.connect();
    let pid = a.pid();
    a.exec("prepare s(int) as select $1 + count(*) from pg_class where relpages >= $1");
    let pid_s = pid.to_string();
    let child = chroot_command(
        &root,
        &[],
        &[
            "/pgdbg",
            "attach",
            &pid_s,
            "-q",
            "--ex",
            "info",
            "--ex",
            "plancache --count 6",
            "--ex",
            "detach",
        ],
    )
    .spawn()
    .unwrap();
    let mut p = Pgdbg { child };
    p.wait_attached(pid);
    // queued on the socket until plancache has armed
    for i in 0..6 {
        a.exec(&format!("execute s({i})"));
    }
    let (code, out, err) = p.wait(Duration::from_secs(120));
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("PostgreSQL 15"), "{out}");
    assert_eq!(
        out.lines().filter(|l| l.starts_with("s #")).count(),
        6,
        "{out}"
    );
    assert!(
        out.contains("plancache: 6 decisions (5 custom, 1 generic)"),
        "{out}"
    );
    assert_eq!(tracer_pid(pid), 0);
    assert!(code_matches_file(
        pid,
        &cl.postgres_binary(),
        "GetCachedPlan",
        32
    ));
    assert_eq!(a.query_one_i64("select 1"), 1);
    cl.assert_no_crash();
}

/// From the same kind of root (plus /etc/hosts): the DWARF of a stripped
/// postgres comes from a debuginfod named `localhost`, with no NSS module
/// or resolver library to load; over HTTPS the TLS handshake runs inside
/// the executable (a self-signed server is refused for its certificate).
#[test]
fn release_executable_alone_uses_debuginfod_by_name() {
    let Some(d) = dist() else { return };
    let root = root_with_only_pgdbg(d, "release-chroot-debuginfod");
    std::fs::create_dir_all(root.join("etc")).unwrap();
    std::fs::write(root.join("etc/hosts"), "127.0.0.1 localhost\n").unwrap();
    let work = scratch("release-debuginfod-work");
    std::fs::create_dir_all(work.join("debug")).unwrap();
    let full = pg_prefix(15).join("bin/postgres");
    let st = Command::new("objcopy")
        .arg("--only-keep-debug")
        .arg(&full)
        .arg(work.join("debug/postgres.debug"))
        .status()
        .unwrap();
    assert!(st.success());
    let st = Command::new("strip")
        .args(["--strip-all", "-o"])
        .arg(root.join("postgres"))
        .arg(&full)
        .status()
        .unwrap();
    assert!(st.success());
    let server = Debuginfod::start(&work.join("debug"), &work.join("db.sqlite"), 1);
    let url = format!("http://localhost:{}", server.port);
    let (code, out, err) = output(chroot_command(
        &root,
        &[
            ("DEBUGINFOD_URLS", &url),
            ("DEBUGINFOD_CACHE_PATH", "/cache"),
        ],
        &[
            "/pgdbg",
            "symbols",
            "extract",
            "/postgres",
            "-o",
            "/pack.json",
        ],
    ));
    assert_eq!(code, 0, "{out}\n{err}");
    assert_eq!(debuginfo_requests(server.port), 1);
    let id = build_id(&full);
    assert!(root.join("cache").join(&id).join("debuginfo").is_file());
    // the same pack as from the binary with its DWARF
    let (code, want, err) = pgdbg(&["symbols", "extract", full.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        std::fs::read_to_string(root.join("pack.json")).unwrap(),
        want
    );

    // HTTPS: a server whose certificate no bundled root signed
    let key = work.join("key.pem");
    let cert = work.join("cert.pem");
    let st = Command::new("openssl")
        .args([
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
        ])
        .args(["-subj", "/CN=localhost", "-keyout"])
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("openssl");
    assert!(st.success());
    let port = free_port();
    let mut tls = Command::new("openssl")
        .args(["s_server", "-quiet", "-www", "-accept"])
        .arg(port.to_string())
        .arg("-cert")
        .arg(&cert)
        .arg("-key")
        .arg(&key)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_until(
        "openssl s_server to listen",
        Duration::from_secs(30),
        || std::net::TcpStream::connect(("127.0.0.1", port)).is_ok(),
    );
    std::fs::remove_dir_all(root.join("cache")).unwrap();
    let url = format!("https://localhost:{port}");
    let (code, out, err) = output(chroot_command(
        &root,
        &[
            ("DEBUGINFOD_URLS", &url),
            ("DEBUGINFOD_CACHE_PATH", "/cache"),
        ],
        &[
            "/pgdbg",
            "symbols",
            "extract",
            "/postgres",
            "-o",
            "/pack2.json",
        ],
    ));
    let _ = tls.kill();
    let _ = tls.wait();
    assert_ne!(code, 0, "{out}\n{err}");
    assert!(
        err.contains(&url) && err.to_lowercase().contains("certificate"),
        "{err}"
    );
}

/// The .deb installs with dpkg into a fresh root: /usr/bin/pgdbg, the
/// manual pages (man renders them), the completions; it depends on
/// nothing, and the installed executable runs in that root.  The tarball
/// holds the same tree; SHA256SUMS checks.
#[test]
fn deb_and_tarball_install_their_files() {
    let Some(d) = dist() else { return };
    let deb = d.dir.join(format!("pgdbg_{}_amd64.deb", d.version));
    let field = |f: &str| -> String {
        let o = Command::new("dpkg-deb")
            .arg("-f")
            .arg(&deb)
            .arg(f)
            .output()
            .unwrap();
        String::from_utf8_lossy(&o.stdout).trim().to_string()
    };
    assert_eq!(field("Package"), "pgdbg");
    assert_eq!(field("Version"), d.version);
    assert_eq!(field("Architecture"), "amd64");
    assert_eq!(field("Depends"), "");

    let root = scratch("release-deb-root");
    std::fs::create_dir_all(root.join("var/lib/dpkg/info")).unwrap();
    std::fs::create_dir_all(root.join("var/lib/dpkg/updates")).unwrap();
    std::fs::write(root.join("var/lib/dpkg/status"), "").unwrap();
    let o = Command::new("dpkg")
        .arg("--root")
        .arg(&root)
        .args(["--log=/dev/null", "-i"])
        .arg(&deb)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = Command::new("dpkg-query")
        .arg("--root")
        .arg(&root)
        .args(["-W", "-f", "${Status}", "pgdbg"])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&o.stdout), "install ok installed");

    let subs = [
        "attach",
        "report",
        "ps",
        "doctor",
        "rescue",
        "symbols",
        "completions",
        "man",
    ];
    let mut files = vec![
        "usr/bin/pgdbg".to_string(),
        "usr/share/man/man1/pgdbg.1.gz".into(),
        "usr/share/bash-completion/completions/pgdbg".into(),
        "usr/share/zsh/vendor-completions/_pgdbg".into(),
        "usr/share/fish/vendor_completions.d/pgdbg.fish".into(),
        "usr/share/doc/pgdbg/copyright".into(),
    ];
    files.extend(
        subs.iter()
            .map(|s| format!("usr/share/man/man1/pgdbg-{s}.1.gz")),
    );
    for f in &files {
        assert!(root.join(f).is_file(), "{f} not installed");
    }
    let page = Command::new("man")
        .arg("-l")
        .arg(root.join("usr/share/man/man1/pgdbg.1.gz"))
        .env("MANPAGER", "cat")
        .env("MANWIDTH", "100")
        .output()
        .expect("man");
    let page = String::from_utf8_lossy(&page.stdout);
    assert!(page.contains("SESSION COMMANDS"), "{page}");
    assert!(page.contains("plancache"), "{page}");
    let (code, out, err) = output(chroot_command(&root, &[], &["/usr/bin/pgdbg", "--version"]));
    assert_eq!(code, 0, "{out}\n{err}");
    assert_version_text(&out, "statically linked");

    let name = format!("pgdbg-{}-x86_64-linux", d.version);
    let o = Command::new("tar")
        .arg("-tzf")
        .arg(d.dir.join(format!("{name}.tar.gz")))
        .output()
        .unwrap();
    let listing = String::from_utf8_lossy(&o.stdout);
    for f in &files {
        let f = f.strip_prefix("usr/").unwrap();
        assert!(
            listing.lines().any(|l| l == format!("{name}/{f}")),
            "{f}:\n{listing}"
        );
    }
    let o = Command::new("sha256sum")
        .arg("-c")
        .arg("SHA256SUMS")
        .current_dir(&d.dir)
        .output()
        .unwrap();
    let sums = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{sums}");
    assert_eq!(
        sums.lines().filter(|l| l.ends_with(": OK")).count(),
        3,
        "{sums}"
    );
}

/// A copy (in a scratch directory) of the minimal Debian root filesystem
/// `scripts/rootfs SUITE PACKAGES...` made (debootstrap, cached).
fn debian_root(name: &str, suite: &str, packages: &[&str]) -> PathBuf {
    let o = Command::new(repo().join("scripts/rootfs"))
        .arg(suite)
        .args(packages)
        .stderr(Stdio::inherit())
        .output()
        .expect("scripts/rootfs");
    assert!(o.status.success(), "scripts/rootfs {suite} failed");
    let cached = PathBuf::from(String::from_utf8_lossy(&o.stdout).trim());
    let root = scratch(name);
    let st = Command::new("cp")
        .arg("-a")
        .arg(format!("{}/.", cached.display()))
        .arg(&root)
        .status()
        .unwrap();
    assert!(st.success(), "cp -a {}", cached.display());
    root
}

/// In a Debian 11 root filesystem (debootstrap minbase: glibc 2.31, none
/// of pgdbg's build machine), the static executable attaches to a backend
/// of the 15 build and runs plancache, plan --next and waits trace; the
/// backend is left as found.
#[test]
fn release_executable_in_a_debian_11_root() {
    let Some(d) = dist() else { return };
    let root = debian_root("release-debian-11", "bullseye", &[]);
    let version = std::fs::read_to_string(root.join("etc/debian_version")).unwrap();
    assert!(version.starts_with("11."), "{version}");
    std::fs::copy(&d.bin, root.join("usr/local/bin/pgdbg")).unwrap();

    let cl = Cluster::start(15);
    let mut a = cl.connect();
    let pid = a.pid();
    a.exec("prepare s(int) as select $1 + count(*) from pg_class where relpages >= $1");
    let pid_s = pid.to_string();
    let child = chroot_command(
        &root,
        &[],
        &[
            "/usr/local/bin/pgdbg",
            "attach",
            &pid_s,
            "-q",
            "--ex",
            "plancache --count 3",
            "--ex",
            "plan --next",
            "--ex",
            "waits trace --for 3s",
            "--ex",
            "detach",
        ],
    )
    .spawn()
    .unwrap();
    let mut p = Pgdbg { child };
    p.wait_attached(pid);
    // each waits until pgdbg has armed (the backend is stopped meanwhile)
    for i in 0..3 {
        a.exec(&format!("execute s({i})"));
    }
    a.exec("select 4711 as debian_11");
    // sleeps until pgdbg is done: some are inside the waits trace
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let st = stop.clone();
    let sleeper = std::thread::spawn(move || {
        while !st.load(std::sync::atomic::Ordering::Relaxed) {
            a.exec("select pg_sleep(0.2)");
        }
        a
    });
    let (code, out, err) = p.wait(Duration::from_secs(120));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let mut a = sleeper.join().unwrap();
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("plancache: 3 decisions (3 custom"), "{out}");
    assert!(out.contains("Result"), "plan --next: {out}");
    assert!(out.contains("PgSleep"), "waits trace: {out}");
    assert_eq!(tracer_pid(pid), 0);
    assert!(code_matches_file(
        pid,
        &cl.postgres_binary(),
        "GetCachedPlan",
        32
    ));
    assert_eq!(a.query_one_i64("select 1"), 1);
    cl.assert_no_crash();
}

/// The .deb installs with `dpkg -i` inside a fresh Debian 12 root
/// filesystem (debootstrap minbase with man-db), where `man pgdbg` and
/// `man pgdbg-doctor` show the pages and the installed pgdbg runs.
#[test]
fn deb_installs_in_a_debian_12_root() {
    let Some(d) = dist() else { return };
    let root = debian_root("release-debian-12", "bookworm", &["man-db"]);
    let version = std::fs::read_to_string(root.join("etc/debian_version")).unwrap();
    assert!(version.starts_with("12."), "{version}");
    let deb = format!("pgdbg_{}_amd64.deb", d.version);
    std::fs::copy(d.dir.join(&deb), root.join("tmp").join(&deb)).unwrap();
    let (code, out, err) = output(chroot_command(
        &root,
        &[],
        &["dpkg", "-i", &format!("/tmp/{deb}")],
    ));
    assert_eq!(code, 0, "dpkg -i: {out}\n{err}");
    let man = |page: &str| {
        output(chroot_command(
            &root,
            &[
                ("MANPAGER", "cat"),
                ("MANWIDTH", "100"),
                ("LANG", "C.UTF-8"),
            ],
            &["man", page],
        ))
    };
    let (code, out, err) = man("pgdbg");
    assert_eq!(code, 0, "man pgdbg: {err}");
    assert!(out.contains("SESSION COMMANDS"), "{out}");
    assert!(out.contains("plancache"), "{out}");
    let (code, out, err) = man("pgdbg-doctor");
    assert_eq!(code, 0, "man pgdbg-doctor: {err}");
    assert!(out.contains("ptrace"), "{out}");
    let (code, out, err) = output(chroot_command(&root, &[], &["pgdbg", "--version"]));
    assert_eq!(code, 0, "{out}\n{err}");
    assert_version_text(&out, "statically linked");
}
