//! A PostgreSQL server in a container of its own, made with `unshare`:
//! its own PID namespace (the postmaster is PID 1 there, as in Docker or a
//! pod), its own mount namespace, and its own root directory (`pivot_root`).
//!
//! Mechanism and why: `unshare --pid --mount --fork` + bind mounts +
//! `pivot_root`, not a container runtime (none is installed here, and a
//! runtime adds nothing the kernel does not: namespaces and a root), and
//! not a debootstrapped Debian root (scripts/rootfs): the server is this
//! project's build, linked against the host's libc, so the container's
//! /usr is the host's /usr bind-mounted (the host's libc and libraries,
//! as the build expects).  What makes it a container for pgdbg is the
//! installation: bind-mounted at `/opt/pgdbg-ct-N-K` inside, a path the host
//! lacks, where the host has only a decoy `plpgsql.so` (same name, other
//! contents).  A debugger that opens the container's paths on the host
//! opens the decoy; the tests watch it with inotify.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The unprivileged user the server runs as (the one scripts/pg-cluster
/// uses).
const USER: &str = "pgdbg";

pub struct Container {
    /// The container's root directory, as the host sees it.
    pub root: PathBuf,
    /// Where the installation lives inside the container (absent on the
    /// host but for the decoy).
    pub install: PathBuf,
    /// The host file at the container's `plpgsql.so` path.
    pub decoy: PathBuf,
    /// The postmaster's host PID (PID 1 in the container).
    pub postmaster: i32,
    /// The data directory as the host sees it.
    pub data: PathBuf,
    unshare: Child,
}

fn run(cmd: &mut Command) {
    let out = cmd.output().unwrap_or_else(|e| panic!("run {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn ensure_user() {
    let known = || {
        Command::new("id")
            .arg(USER)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    // another test binary may add the user at the same time (scripts/test
    // runs two): its useradd wins, or holds /etc/passwd's lock a moment
    let mut last = String::new();
    for _ in 0..50 {
        if known() {
            return;
        }
        let out = Command::new("useradd")
            .args([
                "--system",
                "--no-create-home",
                "--home-dir",
                "/nonexistent",
                "--shell",
                "/usr/sbin/nologin",
                USER,
            ])
            .output()
            .expect("run useradd");
        if out.status.success() {
            return;
        }
        last = String::from_utf8_lossy(&out.stderr).into_owned();
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    panic!("useradd {USER} failed: {last}");
}

/// Settings under which `parallel_query` runs with two workers.
pub const PARALLEL_SETTINGS: &[&str] = &[
    "max_parallel_workers_per_gather = 2",
    "parallel_setup_cost = 0",
    "parallel_tuple_cost = 0",
    "min_parallel_table_scan_size = 0",
    "jit = off",
];

/// In `ct` (started with [`PARALLEL_SETTINGS`]), a parallel query whose
/// workers sleep in a plpgsql function, running until cancelled: its
/// leader's PID in the container, its host PID, and the thread running it,
/// returned once both workers run (their titles name the leader's PID in
/// the container).
pub fn parallel_query(
    ct: &Container,
) -> (
    i32,
    i32,
    std::thread::JoinHandle<Result<(), postgres::Error>>,
) {
    let mut c = ct.connect();
    c.batch_execute(
        "create table ct_t as select g as id from generate_series(1, 20000) g; analyze ct_t;
         create function ct_slow(id int) returns bool language plpgsql parallel safe as $$
         begin perform pg_sleep(0.005); return true; end $$;",
    )
    .unwrap();
    let ns: i32 = c.query_one("select pg_backend_pid()", &[]).unwrap().get(0);
    let host = ct.host_pid(ns);
    let h =
        std::thread::spawn(move || c.batch_execute("select count(*) from ct_t where ct_slow(id)"));
    wait_two_workers(ct, ns);
    (ns, host, h)
}

/// Returns once two parallel workers of the leader whose PID in the
/// container is `ns` run (their titles name it).
pub fn wait_two_workers(ct: &Container, ns: i32) {
    crate::wait_until("two parallel workers", Duration::from_secs(60), || {
        children(ct.postmaster)
            .iter()
            .filter(|p| {
                std::fs::read_to_string(format!("/proc/{p}/cmdline"))
                    .unwrap_or_default()
                    .contains(&format!("parallel worker for PID {ns}"))
            })
            .count()
            == 2
    });
}

/// `plan --progress` printed lines for both parallel workers.
pub fn assert_worker_lines(out: &str, err: &str) {
    let workers: Vec<&str> = out
        .lines()
        .map(str::trim_start)
        .filter(|l| l.starts_with("Worker ") && l.contains("rows so far="))
        .collect();
    assert!(
        workers.iter().any(|l| l.starts_with("Worker 0"))
            && workers.iter().any(|l| l.starts_with("Worker 1")),
        "no worker lines:\n{out}\n{err}"
    );
}

/// The host PIDs whose PPid is `ppid`.
pub fn children(ppid: i32) -> Vec<i32> {
    let mut v = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(st) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
            continue;
        };
        if st
            .lines()
            .any(|l| l.strip_prefix("PPid:").map(str::trim) == Some(&ppid.to_string()))
        {
            v.push(pid);
        }
    }
    v
}

/// A name part no other container or sidecar of this test process has:
/// the tests of one binary may run at once (threads of one process).
fn unique() -> String {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let k = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("{}-{k}", std::process::id())
}

/// `NSpid` of a process: its PID in each namespace, the host's first.
pub fn ns_pids(pid: i32) -> Vec<i32> {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("NSpid:"))
        .map(|v| {
            v.split_whitespace()
                .filter_map(|x| x.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

impl Container {
    /// A PostgreSQL server of `prefix` in its own PID and mount namespace
    /// and root directory; its socket directory is `<root>/sock`.
    pub fn start(prefix: &Path, settings: &[&str]) -> Container {
        Self::start_in(prefix, settings, false)
    }

    /// The same, with the installation seen through an overlayfs mount
    /// (`prefix` the lower layer, an empty upper layer), as Docker and
    /// Podman show an image's files to its container.
    pub fn start_overlay(prefix: &Path, settings: &[&str]) -> Container {
        Self::start_in(prefix, settings, true)
    }

    fn start_in(prefix: &Path, settings: &[&str], overlay: bool) -> Container {
        ensure_user();
        let n = unique();
        let root = PathBuf::from(format!("/tmp/pgdbg-ct-{n}"));
        let install = PathBuf::from(format!("/opt/pgdbg-ct-{n}"));
        let _ = std::fs::remove_dir_all(&root);
        for d in [
            "usr", "etc", "dev", "proc", "tmp", "sock", "data", ".oldroot",
        ] {
            std::fs::create_dir_all(root.join(d)).unwrap();
        }
        let inside = root.join(install.strip_prefix("/").unwrap());
        std::fs::create_dir_all(&inside).unwrap();
        for l in ["lib", "lib64", "bin", "sbin"] {
            let target = std::fs::read_link(Path::new("/").join(l))
                .unwrap_or_else(|_| PathBuf::from(format!("usr/{l}")));
            std::os::unix::fs::symlink(target, root.join(l)).unwrap();
        }
        run(Command::new("chmod").args(["755"]).arg(&root));
        run(Command::new("chmod").args(["1777"]).arg(root.join("tmp")));
        run(Command::new("chown")
            .arg(format!("{USER}:"))
            .arg(root.join("sock"))
            .arg(root.join("data")));
        // the decoy: the container's plpgsql.so path on the host, not an ELF
        let decoy = install.join("lib/postgresql/plpgsql.so");
        std::fs::create_dir_all(decoy.parent().unwrap()).unwrap();
        std::fs::write(&decoy, "not the container's plpgsql.so\n").unwrap();

        let data = root.join("data");
        run(Command::new("runuser")
            .args(["-u", USER, "--"])
            .arg(prefix.join("bin/initdb"))
            .arg("-D")
            .arg(&data)
            .args([
                "-U",
                "postgres",
                "--auth=trust",
                "-E",
                "UTF8",
                "--locale=C",
                "--no-sync",
            ])
            .current_dir("/"));
        let mut conf =
            String::from("listen_addresses = ''\nunix_socket_directories = '/sock'\nfsync = off\n");
        for s in settings {
            conf.push_str(s);
            conf.push('\n');
        }
        let pc = data.join("postgresql.conf");
        let mut text = std::fs::read_to_string(&pc).unwrap();
        text.push_str(&conf);
        std::fs::write(&pc, text).unwrap();

        let group = String::from_utf8(
            Command::new("id")
                .args(["-gn", USER])
                .output()
                .unwrap()
                .stdout,
        )
        .unwrap();
        let r = root.display();
        let p = prefix.display();
        let i = install.display();
        let install_mount = if overlay {
            for d in [".layer/upper", ".layer/work"] {
                std::fs::create_dir_all(root.join(d)).unwrap();
            }
            format!(
                "mount -t overlay overlay -o lowerdir={p},upperdir={r}/.layer/upper,workdir={r}/.layer/work {r}{i}"
            )
        } else {
            format!("mount --bind {p} {r}{i}")
        };
        // pivot_root, as container runtimes do (a chroot would leave the
        // host's / as the namespace's root, and the kernel would name the
        // container's files by their host paths in /proc/PID/maps)
        let script = format!(
            "set -e\n\
             mount --bind {r} {r}\n\
             mount --bind /usr {r}/usr\n\
             mount --bind /etc {r}/etc\n\
             mount --rbind /dev {r}/dev\n\
             {install_mount}\n\
             cd {r}\n\
             pivot_root . .oldroot\n\
             mount -t proc proc /proc\n\
             umount -l /.oldroot\n\
             exec chroot --userspec={USER}:{g} / {i}/bin/postgres -D /data\n",
            g = group.trim(),
        );
        let log = std::fs::File::create(root.join("postmaster.log")).unwrap();
        let unshare = Command::new("unshare")
            .args(["--pid", "--mount", "--fork", "--propagation", "private"])
            .args(["sh", "-c", &script])
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("run unshare");
        let mut c = Container {
            root,
            install,
            decoy,
            postmaster: 0,
            data,
            unshare,
        };
        let t0 = Instant::now();
        loop {
            let ready = std::fs::read_to_string(c.data.join("postmaster.pid"))
                .is_ok_and(|t| t.lines().nth(7).is_some_and(|l| l.trim() == "ready"));
            if ready {
                break;
            }
            if let Ok(Some(st)) = c.unshare.try_wait() {
                panic!("the container's server exited ({st}):\n{}", c.log());
            }
            assert!(
                t0.elapsed() < Duration::from_secs(60),
                "the container's server did not start:\n{}",
                c.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        let kids = children(c.unshare.id() as i32);
        assert_eq!(kids.len(), 1, "unshare's children: {kids:?}");
        c.postmaster = kids[0];
        assert_eq!(
            ns_pids(c.postmaster).last(),
            Some(&1),
            "the postmaster is PID 1 in its namespace"
        );
        c
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.root.join("postmaster.log")).unwrap_or_default()
    }

    pub fn connstr(&self) -> String {
        format!(
            "host={} port=5432 user=postgres dbname=postgres",
            self.root.join("sock").display()
        )
    }

    pub fn connect(&self) -> postgres::Client {
        postgres::Client::connect(&self.connstr(), postgres::NoTls)
            .expect("connect to the container's server")
    }

    /// The host PID of the container's process `ns_pid` (a backend's
    /// `pg_backend_pid()`).
    pub fn host_pid(&self, ns_pid: i32) -> i32 {
        let t0 = Instant::now();
        loop {
            if let Some(p) = children(self.postmaster)
                .into_iter()
                .find(|p| ns_pids(*p).last() == Some(&ns_pid))
            {
                return p;
            }
            assert!(t0.elapsed() < Duration::from_secs(30), "no PID {ns_pid}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Container {
    fn drop(&mut self) {
        // fast shutdown; PID 1 ending ends the namespace and its mounts
        if self.postmaster > 0 {
            unsafe { libc::kill(self.postmaster, libc::SIGINT) };
        }
        let t0 = Instant::now();
        while !matches!(self.unshare.try_wait(), Ok(Some(_))) {
            if t0.elapsed() > Duration::from_secs(60) {
                let _ = self.unshare.kill();
                let _ = self.unshare.wait();
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = std::fs::remove_dir_all(
            self.install
                .parent()
                .unwrap()
                .join(self.install.file_name().unwrap()),
        );
        // the mounts lived in the container's mount namespace only; never
        // remove a root whose /usr is not the empty directory made above
        let usr_empty =
            std::fs::read_dir(self.root.join("usr")).is_ok_and(|mut d| d.next().is_none());
        if usr_empty {
            let _ = std::fs::remove_dir_all(&self.root);
        }
    }
}

/// Watches a file with inotify: was it opened or read since?
pub struct Watch {
    fd: i32,
}

impl Watch {
    pub fn new(path: &Path) -> Watch {
        use std::os::unix::ffi::OsStrExt;
        let c = std::ffi::CString::new(path.as_os_str().as_bytes()).unwrap();
        // SAFETY: plain system calls on a descriptor this struct owns
        let fd = unsafe { libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC) };
        assert!(fd >= 0, "inotify_init1");
        let w = unsafe { libc::inotify_add_watch(fd, c.as_ptr(), libc::IN_OPEN | libc::IN_ACCESS) };
        assert!(w >= 0, "inotify_add_watch {}", path.display());
        Watch { fd }
    }

    /// Whether any open or read happened since `new`.
    pub fn touched(&self) -> bool {
        let mut buf = [0u8; 4096];
        // SAFETY: reads into a buffer of the given size
        let n = unsafe { libc::read(self.fd, buf.as_mut_ptr().cast(), buf.len()) };
        n > 0
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        unsafe { libc::close(self.fd) };
    }
}

/// A second container beside a `Container`, the sidecar case (`docker run
/// --pid=container:PG`, a pod with `shareProcessNamespace: true`,
/// `kubectl debug --target`): pgdbg runs in the server's PID namespace
/// (it sees the server's processes by the PIDs `pg_stat_activity` shows;
/// the postmaster is its PID 1) but in a mount namespace and root
/// directory of its own, so the server's files are nowhere in its root.
///
/// Mechanism and why: `nsenter --pid=/proc/<postmaster>/ns/pid` (the only
/// namespace shared, as `--pid=container:` shares only that one) forks
/// into the server's PID namespace, `unshare --mount` gives the sidecar
/// its own mounts, `/proc` is mounted there for that PID namespace (and
/// sysfs read-only at `/sys`, as runtimes mount it), and
/// `pivot_root` into the sidecar's root (then the old root unmounted), as
/// container runtimes do.  Each command runs in a fresh such container
/// from the same root (as `docker run --rm --pid=container:PG IMAGE pgdbg
/// ...` would), so no process has to stay in the sidecar.
///
/// The root holds pgdbg (the build under test, bind-mounted at
/// `/usr/local/bin/pgdbg`; not scripts/release's static executable, which
/// is a second build of every crate and not the code under test) with the
/// libraries it is linked against under `/pgdbg/lib` (`LD_LIBRARY_PATH`,
/// so that the usual library paths stay free for decoys) and the dynamic
/// loader at `/lib64`, and decoys: files that are not the server's at the paths
/// where the server maps its libc, its dynamic loader, its `postgres`
/// binary and `plpgsql.so`.  A debugger that opens the server's paths in
/// its own root opens a decoy; `decoys` are watched with inotify.
pub struct Sidecar {
    /// The sidecar's root directory, as the host sees it.
    pub root: PathBuf,
    /// The decoys, as the host sees them.
    pub decoys: Vec<PathBuf>,
    /// The server container's postmaster (host PID): whose PID namespace
    /// the sidecar joins.
    target: i32,
    libs: Vec<PathBuf>,
    /// sysfs mounted read-only at /sys, as container runtimes do (`docker
    /// run`, the containers of `kubectl debug`); see [`Sidecar::without_sysfs`].
    sysfs: bool,
    /// The only capabilities pgdbg keeps (`setpriv --bounding-set`), or
    /// all of root's; see [`Sidecar::with_only_capabilities`].
    caps: Option<String>,
    /// The user and group pgdbg runs as (`setpriv --reuid --regid`), or
    /// root; see [`Sidecar::as_user`].
    user: Option<(u32, u32)>,
}

/// Docker's default capabilities of a container's root (moby's
/// `oci/caps/defaults.go`), lower case as `setpriv` names them: no
/// SYS_ADMIN, no SYS_PTRACE, no PERFMON.
pub const DOCKER_DEFAULT_CAPS: &[&str] = &[
    "chown",
    "dac_override",
    "fsetid",
    "fowner",
    "mknod",
    "net_raw",
    "setgid",
    "setuid",
    "setfcap",
    "setpcap",
    "net_bind_service",
    "sys_chroot",
    "kill",
    "audit_write",
];

/// The shared libraries (and the loader) `bin` needs, from `ldd`.
fn linked_libraries(bin: &Path) -> Vec<PathBuf> {
    let out = Command::new("ldd").arg(bin).output().expect("run ldd");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let p = match l.split_once("=>") {
                Some((_, r)) => r.split_whitespace().next()?,
                None => l.split_whitespace().next()?,
            };
            p.starts_with('/').then(|| PathBuf::from(p))
        })
        .collect()
}

impl Sidecar {
    pub fn start(ct: &Container, pgdbg: &Path) -> Sidecar {
        let root = PathBuf::from(format!("/tmp/pgdbg-sc-{}", unique()));
        let _ = std::fs::remove_dir_all(&root);
        for d in [
            "proc",
            "sys",
            "tmp",
            "dev",
            ".oldroot",
            "lib64",
            "pgdbg/lib",
            "usr/local/bin",
            "usr/lib/x86_64-linux-gnu",
        ] {
            std::fs::create_dir_all(root.join(d)).unwrap();
        }
        run(Command::new("chmod").args(["1777"]).arg(root.join("tmp")));
        std::fs::write(root.join("usr/local/bin/pgdbg"), "").unwrap();
        std::fs::write(root.join("dev/null"), "").unwrap();
        let libs = linked_libraries(pgdbg);
        assert!(
            libs.iter().any(|l| l.ends_with("ld-linux-x86-64.so.2")),
            "{libs:?}"
        );
        for l in &libs {
            let name = l.file_name().unwrap();
            let at = if l.starts_with("/lib64") {
                root.join("lib64").join(name)
            } else {
                root.join("pgdbg/lib").join(name)
            };
            std::fs::write(at, "").unwrap();
        }
        // the decoys: where the server's files are in its root
        let mut decoys = Vec::new();
        for p in [
            ct.install.join("lib/postgresql/plpgsql.so"),
            ct.install.join("bin/postgres"),
            PathBuf::from("/usr/lib/x86_64-linux-gnu/libc.so.6"),
            PathBuf::from("/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2"),
        ] {
            let d = root.join(p.strip_prefix("/").unwrap());
            std::fs::create_dir_all(d.parent().unwrap()).unwrap();
            std::fs::write(&d, format!("not the server's {}\n", p.display())).unwrap();
            decoys.push(d);
        }
        Sidecar {
            root,
            decoys,
            target: ct.postmaster,
            libs,
            sysfs: true,
            caps: None,
            user: None,
        }
    }

    /// The same sidecar whose pgdbg runs as the server's own user (a
    /// non-root uid, as operators such as CloudNativePG run PostgreSQL;
    /// `kubectl debug` with that `runAsUser`): no capabilities at all.
    pub fn as_servers_user(mut self) -> Sidecar {
        let id = |flag: &str| -> u32 {
            let out = Command::new("id").args([flag, USER]).output().unwrap();
            String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
        };
        self = self.with_setpriv();
        self.user = Some((id("-u"), id("-g")));
        self
    }

    /// setpriv and its libraries, mounted into the sidecar when it runs.
    fn with_setpriv(mut self) -> Sidecar {
        let setpriv = PathBuf::from("/usr/bin/setpriv");
        std::fs::write(self.root.join("pgdbg/setpriv"), "").unwrap();
        for l in linked_libraries(&setpriv) {
            if self.libs.iter().any(|k| k.file_name() == l.file_name()) {
                continue;
            }
            std::fs::write(self.root.join("pgdbg/lib").join(l.file_name().unwrap()), "").unwrap();
            self.libs.push(l);
        }
        self
    }

    /// The same sidecar whose pgdbg keeps only `caps` (after the mounts
    /// that make the sidecar, which need root's): `docker run --cap-add
    /// SYS_PTRACE` is `DOCKER_DEFAULT_CAPS` and `sys_ptrace`.  `setpriv`
    /// and its libraries are mounted into the sidecar for that.
    pub fn with_only_capabilities(mut self, caps: &[&str]) -> Sidecar {
        self = self.with_setpriv();
        let list: Vec<String> = caps.iter().map(|c| format!("+{c}")).collect();
        self.caps = Some(format!("-all,{}", list.join(",")));
        self
    }

    /// The same sidecar made without /sys (a runtime that mounts none).
    pub fn without_sysfs(mut self) -> Sidecar {
        self.sysfs = false;
        self
    }

    /// The command that runs `pgdbg ARGS` in a fresh sidecar container.
    pub fn command(&self, pgdbg: &Path, args: &[&str]) -> Command {
        let r = self.root.display();
        let mut script = format!(
            "set -e\n\
             mount --bind {r} {r}\n\
             mount --bind {b} {r}/usr/local/bin/pgdbg\n\
             mount --bind /dev/null {r}/dev/null\n",
            b = pgdbg.display()
        );
        for l in &self.libs {
            let name = l.file_name().unwrap().to_string_lossy();
            let at = if l.starts_with("/lib64") {
                format!("{r}/lib64/{name}")
            } else {
                format!("{r}/pgdbg/lib/{name}")
            };
            script.push_str(&format!("mount --bind {} {at}\n", l.display()));
        }
        if self.sysfs {
            script.push_str(&format!("mount -t sysfs -o ro sysfs {r}/sys\n"));
        }
        let mut setpriv = String::new();
        if self.caps.is_some() || self.user.is_some() {
            script.push_str(&format!(
                "mount --bind /usr/bin/setpriv {r}/pgdbg/setpriv\n"
            ));
            setpriv.push_str("/pgdbg/setpriv ");
            if let Some(set) = &self.caps {
                setpriv.push_str(&format!("--bounding-set={set} "));
            }
            if let Some((u, g)) = self.user {
                setpriv.push_str(&format!("--reuid={u} --regid={g} --clear-groups "));
            }
            setpriv.push_str("--inh-caps=-all ");
        }
        // /proc of the PID namespace this shell was forked into (the
        // server's), then the sidecar's root; the old root is unmounted
        // with its own umount (its libraries found there, by the loader
        // the new root has at /lib64)
        script.push_str(&format!(
            "mount -t proc proc {r}/proc\n\
             cd {r}\n\
             pivot_root . .oldroot\n\
             LD_LIBRARY_PATH=/.oldroot/usr/lib/x86_64-linux-gnu /.oldroot/usr/bin/umount -l /.oldroot\n\
             export LD_LIBRARY_PATH=/pgdbg/lib HOME=/tmp\n\
             exec {setpriv}/usr/local/bin/pgdbg \"$@\"\n"
        ));
        let mut c = Command::new("nsenter");
        c.arg(format!("--pid=/proc/{}/ns/pid", self.target))
            .args(["--", "unshare", "--mount", "--propagation", "private"])
            .args(["sh", "-c", &script, "sh"])
            .args(args)
            .env_remove("DEBUGINFOD_URLS")
            .stdin(Stdio::null());
        c
    }

    /// `pgdbg ARGS` started in the sidecar, returned once it attached to
    /// the process whose host PID is `host`.
    pub fn spawn_attached(&self, pgdbg: &Path, args: &[&str], host: i32) -> crate::Pgdbg {
        let child = self
            .command(pgdbg, args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run pgdbg in the sidecar");
        let mut p = crate::Pgdbg { child };
        p.wait_attached(host);
        p
    }

    /// `pgdbg ARGS` in the sidecar: (exit code, stdout, stderr).
    pub fn pgdbg(&self, pgdbg: &Path, args: &[&str]) -> (i32, String, String) {
        let out = self
            .command(pgdbg, args)
            .output()
            .expect("run pgdbg in the sidecar");
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    /// The host's path of a file the sidecar sees at `inside`.
    pub fn host_path(&self, inside: &str) -> PathBuf {
        self.root.join(inside.trim_start_matches('/'))
    }
}

impl Drop for Sidecar {
    fn drop(&mut self) {
        // the mounts lived in each command's own mount namespace; never
        // remove a root with something still mounted in it
        let mounted = std::fs::read_to_string("/proc/self/mountinfo")
            .unwrap_or_default()
            .contains(&self.root.display().to_string());
        if !mounted {
            let _ = std::fs::remove_dir_all(&self.root);
        }
    }
}
