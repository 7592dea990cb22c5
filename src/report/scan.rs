//! Reading a capture file: line by line, each line's JSON checked against
//! the typed events, an incomplete last line and a newer format told apart.

use super::*;

/// Read a capture line by line from `r`, handing each event to `sink`
/// (nothing is kept: memory does not grow with the capture). `name` is
/// used in errors (`name:LINE: ...`). Blank lines are skipped; every
/// other line must be a JSON object with `event` (string), `ts` (number)
/// and `pid` (integer), except an incomplete last line (see
/// [`Scanned::incomplete_last`]). An `attach` event of a capture format
/// newer than [`CAPTURE_FORMAT`] is an error; one without a format is
/// format 1.
pub fn scan_capture(
    name: &str,
    mut r: impl std::io::BufRead,
    mut sink: impl FnMut(Event),
) -> Result<Scanned> {
    let mut buf = Vec::with_capacity(4096);
    let mut n = 0;
    let mut events = 0;
    let mut unreadable = 0;
    let mut first_unreadable = None;
    loop {
        buf.clear();
        let got = match r.read_until(b'\n', &mut buf) {
            Ok(g) => g,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => bail!("cannot read capture {name}: {e}"),
        };
        if got == 0 {
            break;
        }
        n += 1;
        let complete = buf.last() == Some(&b'\n');
        let mut bytes = &buf[..];
        if complete {
            bytes = &bytes[..bytes.len() - 1];
            bytes = bytes.strip_suffix(b"\r").unwrap_or(bytes);
        }
        let incomplete = Scanned {
            events,
            incomplete_last: Some(n),
            unreadable,
            first_unreadable,
        };
        let line = match std::str::from_utf8(bytes) {
            Ok(l) => l,
            // cut inside a multi-byte character
            Err(_) if !complete => return Ok(incomplete),
            Err(_) => bail!("{name}:{n}: not UTF-8 text"),
        };
        if line.trim().is_empty() {
            continue;
        }
        let parsed = match serde_json::from_str::<Line>(line) {
            Ok(l) => l,
            Err(_) => match untyped_line(name, n, line, complete)? {
                Some(l) => {
                    unreadable += 1;
                    first_unreadable.get_or_insert(n);
                    l
                }
                None => return Ok(incomplete),
            },
        };
        if let CaptureEvent::Attach { format, .. } = &parsed.event {
            check_format(name, n, (*format).into())?;
        }
        events += 1;
        sink(Event {
            line: n,
            ts: parsed.ts,
            pid: parsed.pid,
            ns_pid: parsed.ns_pid,
            event: parsed.event,
        });
    }
    Ok(Scanned {
        events,
        incomplete_last: None,
        unreadable,
        first_unreadable,
    })
}

/// A newer pgdbg's capture format is refused (its events may mean other
/// things).
pub(super) fn check_format(name: &str, n: usize, format: u64) -> Result<()> {
    if format > CAPTURE_FORMAT as u64 {
        bail!(
            "{name}:{n}: the capture is in format {format}, written by a newer pgdbg (this one reads format {CAPTURE_FORMAT}): report it with that pgdbg"
        );
    }
    Ok(())
}

/// A line that does not read into a [`Line`]: the error naming what is
/// wrong with it (not JSON, no `event`, `ts` or `pid`), or None when it is
/// an incomplete last line, or, when only its fields are not what pgdbg
/// writes, the line as an event of no table ([`CaptureEvent::Other`]).
pub(super) fn untyped_line(
    name: &str,
    n: usize,
    line: &str,
    complete: bool,
) -> Result<Option<Line>> {
    let v: Value = match serde_json::from_str(line) {
        Ok(v) => v,
        Err(_) if !complete => return Ok(None),
        Err(e) => {
            // serde_json counts lines of this one line: keep the column.
            let why = e.to_string();
            let why = why.split(" at line ").next().unwrap_or(&why).to_string();
            bail!(
                "{name}:{n}: not a valid JSON line: {why} at column {}",
                e.column()
            );
        }
    };
    let Some(obj) = v.as_object() else {
        bail!("{name}:{n}: not a capture event (a JSON object was expected)");
    };
    let kind = obj
        .get("event")
        .and_then(Value::as_str)
        .ok_or_else(|| anyhow!("{name}:{n}: not a capture event (no \"event\" string)"))?
        .to_string();
    let ts = obj
        .get("ts")
        .and_then(Value::as_f64)
        .ok_or_else(|| anyhow!("{name}:{n}: event without a numeric \"ts\""))?;
    let pid = obj
        .get("pid")
        .and_then(Value::as_i64)
        .ok_or_else(|| anyhow!("{name}:{n}: event without an integer \"pid\""))?;
    if kind == "attach"
        && let Some(f) = obj.get("format").and_then(Value::as_u64)
    {
        check_format(name, n, f)?;
    }
    Ok(Some(Line {
        ts,
        pid,
        ns_pid: obj.get("ns_pid").and_then(Value::as_i64),
        event: CaptureEvent::Other,
    }))
}

/// Parse a capture's text into its events (see [`scan_capture`]; an
/// incomplete last line is left out).
pub fn parse_capture(name: &str, text: &str) -> Result<Vec<Event>> {
    let mut out = Vec::new();
    scan_capture(name, text.as_bytes(), |e| out.push(e))?;
    Ok(out)
}

// ---------------------------------------------------------------------
// Report content (also the JSON document)

pub(super) fn open_capture(path: &std::path::Path) -> Result<std::io::BufReader<std::fs::File>> {
    let f = std::fs::File::open(path)
        .map_err(|e| anyhow!("cannot read capture {}: {e}", path.display()))?;
    Ok(std::io::BufReader::with_capacity(1 << 16, f))
}

/// Read a capture file, handing each event to `sink`; errors are one line
/// naming the file. An incomplete last line is reported on stderr and
/// left out; a capture without events is an error.
pub fn read(path: &std::path::Path, sink: impl FnMut(Event)) -> Result<Scanned> {
    let name = path.display().to_string();
    let scanned = scan_capture(&name, open_capture(path)?, sink)?;
    if let Some(n) = scanned.incomplete_last {
        crate::runtime::sink().warn(format_args!(
            "pgdbg: {name}: the last line (line {n}) is incomplete (a writer was killed?): ignored"
        ));
    }
    if let Some(first) = scanned.first_unreadable {
        let n = scanned.unreadable;
        crate::runtime::sink().warn(format_args!(
            "pgdbg: {name}: {n} event{} with fields of other types than pgdbg writes (first at line {first}) counted but left out of the tables",
            if n == 1 { "" } else { "s" }
        ));
    }
    if scanned.events == 0 {
        bail!(
            "capture {name} is empty: no events (record some with: pgdbg attach PID --capture {name})"
        );
    }
    Ok(scanned)
}

/// Read and parse a whole capture file into memory (every event kept:
/// `run` streams instead).
pub fn load(path: &std::path::Path) -> Result<Vec<Event>> {
    let mut events = Vec::new();
    read(path, |e| events.push(e))?;
    Ok(events)
}
