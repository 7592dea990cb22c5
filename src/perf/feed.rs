//! The statements' marks a worker of `pgdbg attach --cluster` takes from
//! pgdbg's leader (src/cluster_marks.rs), which reads them from uprobes
//! the postmaster's processes inherit: the worker's side and the bytes on
//! the socket (a Unix socket in the abstract namespace, named in the
//! worker's hidden `--statements-from` option).

use super::watch::Mark;
use std::io::{Read, Write};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixStream};
use std::sync::OnceLock;
use std::time::Duration;

/// A request: register a backend (answered with one byte once its hits
/// are kept), or take its marks (answered with them; it is forgotten).
pub(crate) const REGISTER: u8 = b'R';
pub(crate) const TAKE: u8 = b'T';
/// How long a worker waits for the leader, and the leader for a worker's
/// request or its reading of an answer (each connection has its own
/// thread in the leader: a slow one delays no other).
pub(crate) const TIMEOUT: Duration = Duration::from_secs(5);

/// A backend's marks, as a worker takes them.
#[derive(Debug, Default)]
pub struct Taken {
    pub marks: Vec<Mark>,
    /// marks not kept (more than the leader keeps for one backend)
    pub dropped: u64,
    /// hits of any process the kernel could not record while it was
    /// registered (a ring was full)
    pub lost_since: u64,
}

/// Marks as bytes: the counts not kept and lost, the marks' number, then
/// each one's kind, time, argument and text (its length, u32::MAX for
/// none, and its bytes).
pub(crate) fn encode(t: &Taken) -> Vec<u8> {
    let mut b = Vec::with_capacity(20 + t.marks.len() * 64);
    b.extend(t.dropped.to_le_bytes());
    b.extend(t.lost_since.to_le_bytes());
    b.extend((t.marks.len() as u32).to_le_bytes());
    for m in &t.marks {
        b.push(m.kind);
        b.extend(m.time.to_le_bytes());
        b.extend(m.arg.to_le_bytes());
        match &m.text {
            Some(t) => {
                b.extend((t.len() as u32).to_le_bytes());
                b.extend(t.as_bytes());
            }
            None => b.extend(u32::MAX.to_le_bytes()),
        }
    }
    b
}

fn decode(r: &mut impl Read) -> std::io::Result<Taken> {
    let mut h = [0u8; 20];
    r.read_exact(&mut h)?;
    let dropped = u64::from_le_bytes(h[0..8].try_into().unwrap());
    let lost_since = u64::from_le_bytes(h[8..16].try_into().unwrap());
    let n = u32::from_le_bytes(h[16..20].try_into().unwrap());
    let mut marks = Vec::new();
    for _ in 0..n {
        let mut h = [0u8; 21];
        r.read_exact(&mut h)?;
        let len = u32::from_le_bytes(h[17..21].try_into().unwrap());
        let text = if len == u32::MAX {
            None
        } else {
            let mut t = vec![0u8; len as usize];
            r.read_exact(&mut t)?;
            Some(String::from_utf8_lossy(&t).into_owned())
        };
        marks.push(Mark {
            kind: h[0],
            time: u64::from_le_bytes(h[1..9].try_into().unwrap()),
            arg: u64::from_le_bytes(h[9..17].try_into().unwrap()),
            text,
        });
    }
    Ok(Taken {
        marks,
        dropped,
        lost_since,
    })
}

/// In a worker: the leader's socket (`--statements-from`), when the
/// statements come from it.
static FEED: OnceLock<String> = OnceLock::new();

/// Called by a worker started with `--statements-from NAME`.
pub fn set_feed(name: &str) {
    let _ = FEED.set(name.to_string());
}

/// The leader's socket, in a worker whose statements come from it.
pub fn feed() -> Option<&'static str> {
    FEED.get().map(String::as_str)
}

fn request(feed: &str, op: u8, pid: i32) -> std::io::Result<UnixStream> {
    let addr = SocketAddr::from_abstract_name(feed.as_bytes())?;
    let mut c = UnixStream::connect_addr(&addr)?;
    c.set_read_timeout(Some(TIMEOUT))?;
    c.set_write_timeout(Some(TIMEOUT))?;
    let mut req = vec![op];
    req.extend((pid as u32).to_le_bytes());
    c.write_all(&req)?;
    Ok(c)
}

/// In a worker: backend `pid` registered with the leader, whose marks
/// are kept from then on until taken; taken (and dropped) if never
/// taken, so that the leader forgets them.
pub struct Registration {
    feed: &'static str,
    pid: i32,
    taken: bool,
}

/// In a worker: have the leader keep backend `pid`'s marks from now on.
pub fn register(feed: &'static str, pid: i32) -> std::io::Result<Registration> {
    let mut c = request(feed, REGISTER, pid)?;
    let mut ack = [0u8; 1];
    c.read_exact(&mut ack)?;
    Ok(Registration {
        feed,
        pid,
        taken: false,
    })
}

impl Registration {
    /// The backend's marks since it was registered (every one recorded up
    /// to now); the leader forgets them.
    pub fn take(mut self) -> std::io::Result<Taken> {
        self.taken = true;
        let mut c = request(self.feed, TAKE, self.pid)?;
        decode(&mut c)
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        if !self.taken
            && let Ok(mut c) = request(self.feed, TAKE, self.pid)
        {
            let _ = decode(&mut c);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marks_encode_and_decode() {
        let marks = vec![
            Mark {
                kind: 0,
                time: 7,
                arg: 0xdead,
                text: Some("select 1".into()),
            },
            Mark {
                kind: 1,
                time: 9,
                arg: 0xdead,
                text: None,
            },
            Mark {
                kind: 0,
                time: 10,
                arg: 1,
                text: Some(String::new()),
            },
        ];
        let t = Taken {
            marks,
            dropped: 3,
            lost_since: 5,
        };
        let got = decode(&mut &encode(&t)[..]).unwrap();
        assert_eq!((got.dropped, got.lost_since), (3, 5));
        assert_eq!(got.marks.len(), 3);
        for (a, b) in t.marks.iter().zip(&got.marks) {
            assert_eq!(
                (a.kind, a.time, a.arg, &a.text),
                (b.kind, b.time, b.arg, &b.text)
            );
        }
        assert!(decode(&mut &encode(&t)[..40]).is_err());
    }
}
