//! A new child of the postmaster, just forked: is it to become a client
//! backend?  The postmaster forks one holding the connection it accepted
//! for it on one of its listening sockets; its other children (autovacuum
//! and parallel workers, background workers) hold none, or only a
//! connection they inherited from the postmaster (a library's), whose
//! local address is not one the postmaster listens on.  Nothing is read
//! or written in the process: copies of its descriptors are looked at and
//! closed; the postmaster's listening sockets are read from /proc.

use anyhow::{Result, bail};

/// The local addresses the postmaster listens on, as this module
/// compares them: `unix PATH` (its bytes as /proc/net/unix prints them:
/// `@NAME` for an abstract one) and `tcp ADDR PORT` (ADDR the 4 or 16
/// bytes, all zero for any address).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Listen {
    Unix(Vec<u8>),
    Tcp(Vec<u8>, u16),
}

/// The postmaster's listening sockets: its socket descriptors' inodes
/// found listening in its network namespace's tables
/// (/proc/PID/net/unix, tcp, tcp6).  Read once: a postmaster opens them
/// at its start and keeps them (a crash restart too).
pub fn listening(postmaster: i32) -> Result<Vec<Listen>> {
    let mut inodes = std::collections::HashSet::new();
    for e in std::fs::read_dir(format!("/proc/{postmaster}/fd"))?.flatten() {
        if let Ok(t) = std::fs::read_link(e.path())
            && let Some(n) = t
                .to_str()
                .and_then(|t| t.strip_prefix("socket:["))
                .and_then(|t| t.strip_suffix(']'))
                .and_then(|t| t.parse::<u64>().ok())
        {
            inodes.insert(n);
        }
    }
    let net = |f: &str| std::fs::read_to_string(format!("/proc/{postmaster}/net/{f}"));
    let mut out = unix_listening(
        &std::fs::read(format!("/proc/{postmaster}/net/unix"))?,
        &inodes,
    );
    for f in ["tcp", "tcp6"] {
        // absent without IPv6
        let Ok(text) = net(f) else { continue };
        // sl local_address rem_address st ... inode (the tenth column);
        // st 0A: LISTEN
        for l in text.lines().skip(1) {
            let w: Vec<&str> = l.split_whitespace().collect();
            if w.len() > 9
                && w[3] == "0A"
                && w[9].parse().is_ok_and(|i: u64| inodes.contains(&i))
                && let Some(a) = tcp_address(w[1])
            {
                out.push(a);
            }
        }
    }
    Ok(out)
}

/// The listening unix sockets among `inodes` in /proc/net/unix's `text`:
/// `Num RefCount Protocol Flags Type St Inode[ Path]`, Flags
/// __SO_ACCEPTCON (0x10000) for listening; the path is the rest of the
/// line after the one space that follows the inode, bytes as they are
/// (spaces, non-UTF-8 bytes).
fn unix_listening(text: &[u8], inodes: &std::collections::HashSet<u64>) -> Vec<Listen> {
    let mut out = Vec::new();
    for l in text.split(|b| *b == b'\n').skip(1) {
        let mut rest = l;
        let mut w: Vec<&[u8]> = Vec::new();
        while w.len() < 7 {
            let start = rest.iter().position(|b| *b != b' ').unwrap_or(rest.len());
            rest = &rest[start..];
            let end = rest.iter().position(|b| *b == b' ').unwrap_or(rest.len());
            if end == 0 {
                break;
            }
            w.push(&rest[..end]);
            rest = &rest[end..];
        }
        let num = |b: &[u8], radix| {
            std::str::from_utf8(b)
                .ok()
                .and_then(|t| u64::from_str_radix(t, radix).ok())
        };
        if let [_, _, _, flags, _, _, inode] = w[..]
            && let Some(path) = rest.strip_prefix(b" ")
            && !path.is_empty()
            && num(inode, 10).is_some_and(|i| inodes.contains(&i))
            && num(flags, 16).is_some_and(|f| f & 0x10000 != 0)
        {
            out.push(Listen::Unix(path.to_vec()));
        }
    }
    out
}

/// /proc/net/tcp's `ADDR:PORT`: the address as 32-bit words in hex, each
/// printed from the machine's byte order; the port in hex.
fn tcp_address(s: &str) -> Option<Listen> {
    let (a, p) = s.split_once(':')?;
    if a.len() % 8 != 0 {
        return None;
    }
    let mut bytes = Vec::new();
    for i in (0..a.len()).step_by(8) {
        let w = u32::from_str_radix(&a[i..i + 8], 16).ok()?;
        bytes.extend_from_slice(&w.to_ne_bytes());
    }
    Some(Listen::Tcp(bytes, u16::from_str_radix(p, 16).ok()?))
}

/// Whether `local` (a connected socket's own address) is one of the
/// addresses listened on: an accepted connection has the listening
/// socket's path, or its port and one of its addresses (any, for a
/// socket listening on all of them; an IPv4 one mapped into IPv6).
fn accepted_on(local: &Listen, listen: &[Listen]) -> bool {
    listen.iter().any(|l| match (l, local) {
        (Listen::Unix(a), Listen::Unix(b)) => a == b,
        (Listen::Tcp(a, pa), Listen::Tcp(b, pb)) => {
            let v4 = |x: &[u8]| match x.len() {
                16 if x[..10].iter().all(|b| *b == 0) && x[10..12] == [0xff, 0xff] => {
                    x[12..].to_vec()
                }
                _ => x.to_vec(),
            };
            pa == pb && (a.iter().all(|x| *x == 0) || v4(a) == v4(b))
        }
        _ => false,
    })
}

/// How many connections process `pid` holds that were accepted on one of
/// the `listen` addresses: connected stream sockets (a peer on the other
/// end) whose local address is one listened on.  Looked at through copies
/// of its descriptors (pidfd_getfd, Linux 5.6; needs ptrace permission).
pub fn client_connections(pid: i32, listen: &[Listen]) -> Result<usize> {
    // SAFETY: pidfd_open(2) of a PID.
    let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) } as i32;
    if pidfd < 0 {
        bail!(
            "cannot open process {pid} ({})",
            std::io::Error::last_os_error()
        );
    }
    // SAFETY: a descriptor we own from here.
    let _pidfd_owned =
        unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(pidfd) };
    let mut n = 0;
    let rd = std::fs::read_dir(format!("/proc/{pid}/fd"))?;
    for e in rd.flatten() {
        let Ok(target) = std::fs::read_link(e.path()) else {
            continue;
        };
        if !target.to_string_lossy().starts_with("socket:") {
            continue;
        }
        let Some(num) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        // SAFETY: pidfd_getfd(2): a copy of its descriptor, ours to close.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd, num, 0) } as i32;
        if fd < 0 {
            continue;
        }
        // SAFETY: we own the copy.
        let fd = unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) };
        if sock_int(&fd, libc::SO_TYPE) == Some(libc::SOCK_STREAM)
            && has_peer(&fd)
            && local_address(&fd).is_some_and(|a| accepted_on(&a, listen))
        {
            n += 1;
        }
    }
    Ok(n)
}

fn sock_int(fd: &std::os::fd::OwnedFd, opt: i32) -> Option<i32> {
    use std::os::fd::AsRawFd;
    let mut v: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: getsockopt with an int of the right size.
    let r = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            opt,
            &mut v as *mut _ as *mut libc::c_void,
            &mut len,
        )
    };
    (r == 0).then_some(v)
}

fn has_peer(fd: &std::os::fd::OwnedFd) -> bool {
    use std::os::fd::AsRawFd;
    // SAFETY: a zeroed sockaddr_storage is valid.
    let mut sa: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    // SAFETY: getpeername into a buffer of its size.
    unsafe {
        libc::getpeername(
            fd.as_raw_fd(),
            &mut sa as *mut _ as *mut libc::sockaddr,
            &mut len,
        ) == 0
    }
}

/// A socket's own address (getsockname), as `Listen` compares it.
fn local_address(fd: &std::os::fd::OwnedFd) -> Option<Listen> {
    use std::os::fd::AsRawFd;
    // SAFETY: a zeroed sockaddr_storage is valid.
    let mut sa: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    // SAFETY: getsockname into a buffer of its size.
    let r = unsafe {
        libc::getsockname(
            fd.as_raw_fd(),
            &mut sa as *mut _ as *mut libc::sockaddr,
            &mut len,
        )
    };
    if r != 0 {
        return None;
    }
    match sa.ss_family as i32 {
        libc::AF_UNIX => {
            // SAFETY: the kernel filled a sockaddr_un
            let un: &libc::sockaddr_un = unsafe { &*(&sa as *const _ as *const libc::sockaddr_un) };
            let n = (len as usize).saturating_sub(std::mem::size_of::<libc::sa_family_t>());
            let p: Vec<u8> = un.sun_path[..n.min(un.sun_path.len())]
                .iter()
                .map(|c| *c as u8)
                .collect();
            Some(Listen::Unix(unix_path(&p)))
        }
        libc::AF_INET => {
            // SAFETY: the kernel filled a sockaddr_in
            let a: &libc::sockaddr_in = unsafe { &*(&sa as *const _ as *const libc::sockaddr_in) };
            Some(Listen::Tcp(
                a.sin_addr.s_addr.to_ne_bytes().to_vec(),
                u16::from_be(a.sin_port),
            ))
        }
        libc::AF_INET6 => {
            // SAFETY: the kernel filled a sockaddr_in6
            let a: &libc::sockaddr_in6 =
                unsafe { &*(&sa as *const _ as *const libc::sockaddr_in6) };
            Some(Listen::Tcp(
                a.sin6_addr.s6_addr.to_vec(),
                u16::from_be(a.sin6_port),
            ))
        }
        _ => None,
    }
}

/// A unix socket's path as /proc/net/unix prints it: up to its first NUL,
/// or, abstract (a leading NUL), `@` and the name with NULs as `@`.
fn unix_path(p: &[u8]) -> Vec<u8> {
    match p.first() {
        Some(0) => p.iter().map(|b| if *b == 0 { b'@' } else { *b }).collect(),
        _ => {
            let end = p.iter().position(|b| *b == 0).unwrap_or(p.len());
            p[..end].to_vec()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tcp_addresses_from_proc() {
        // 127.0.0.1:5432 on a little-endian machine
        if cfg!(target_endian = "little") {
            assert_eq!(
                tcp_address("0100007F:1538"),
                Some(Listen::Tcp(vec![127, 0, 0, 1], 5432))
            );
        }
        let any = tcp_address("00000000:1538").unwrap();
        let any6 = tcp_address("00000000000000000000000000000000:1538").unwrap();
        let conn = Listen::Tcp(vec![10, 0, 0, 7], 5432);
        let mapped = Listen::Tcp(
            vec![0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 7],
            5432,
        );
        assert!(accepted_on(&conn, std::slice::from_ref(&any)));
        assert!(accepted_on(&mapped, std::slice::from_ref(&any6)));
        assert!(accepted_on(
            &mapped,
            &[Listen::Tcp(vec![10, 0, 0, 7], 5432)]
        ));
        // another port (a connection the postmaster made itself)
        assert!(!accepted_on(&Listen::Tcp(vec![10, 0, 0, 7], 40000), &[any]));
        assert!(!accepted_on(
            &conn,
            &[Listen::Tcp(vec![127, 0, 0, 1], 5432)]
        ));
    }

    #[test]
    fn unix_paths_as_proc_prints_them() {
        assert_eq!(unix_path(b"/tmp/.s.PGSQL.5432\0\0"), b"/tmp/.s.PGSQL.5432");
        assert_eq!(unix_path(b"\0pg\0x"), b"@pg@x");
        // a name that is not UTF-8 or not ASCII, byte for byte
        assert_eq!(unix_path(b"\0p\xe9g\xff"), b"@p\xe9g\xff");
        let l = [Listen::Unix(b"/tmp/.s.PGSQL.5432".to_vec())];
        assert!(accepted_on(
            &Listen::Unix(unix_path(b"/tmp/.s.PGSQL.5432\0")),
            &l
        ));
        // an unnamed socket (a library's connection to /dev/log)
        assert!(!accepted_on(&Listen::Unix(Vec::new()), &l));
    }

    #[test]
    fn unix_listening_sockets_from_proc() {
        let inodes = [27001, 27002, 27003, 27004].into_iter().collect();
        let mut text = b"Num       RefCount Protocol Flags    Type St Inode Path\n".to_vec();
        // a directory with spaces in its name
        text.extend_from_slice(
            b"0000000000000000: 00000002 00000000 00010000 0001 01 27001 /run/my pg/.s.PGSQL.5432\n",
        );
        // an abstract name, not UTF-8
        text.extend_from_slice(
            b"0000000000000000: 00000002 00000000 00010000 0001 01 27002 @p\xe9g\n",
        );
        // connected, not listening
        text.extend_from_slice(
            b"0000000000000000: 00000003 00000000 00000000 0001 03 27003 /tmp/x\n",
        );
        // listening, unnamed; then one not the postmaster's
        text.extend_from_slice(
            b"0000000000000000: 00000002 00000000 00010000 0001 01  9999 /tmp/y\n",
        );
        text.extend_from_slice(b"0000000000000000: 00000002 00000000 00010000 0001 01 27004\n");
        assert_eq!(
            unix_listening(&text, &inodes),
            vec![
                Listen::Unix(b"/run/my pg/.s.PGSQL.5432".to_vec()),
                Listen::Unix(b"@p\xe9g".to_vec()),
            ]
        );
    }
}
