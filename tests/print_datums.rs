//! `print DATUM::TYPE` on a live backend (15 and 18) stopped in
//! printtup: every column of a row, read from memory as a Datum, shows
//! the text the server's own `::text` gives for the same value (asked of
//! the server, never typed here); varlenas with 1-byte headers (a table's
//! tuple), a compressed and a TOAST-pointer text say so; `text *` and
//! NameData print their strings; bad input is one line and leaves the
//! backend running and clean; `info types` agrees with gdb.

use common::ex::*;
use common::*;
use pgdbg_testbed as common;

/// Values of each type `::` knows, with their edge cases.
const VALUES: &[(&str, &str)] = &[
    ("-12.345::numeric", "numeric"),
    ("'NaN'::numeric", "numeric"),
    ("'-Infinity'::numeric", "numeric"),
    ("123456789012345678901234.5::numeric", "numeric"),
    ("0.000120::numeric", "numeric"),
    ("-100000000.00000001::numeric", "numeric"),
    ("0::numeric", "numeric"),
    ("'2024-02-29 13:14:15.25+00'::timestamptz", "timestamptz"),
    ("'1969-07-20 20:17:40.000001'::timestamp", "timestamp"),
    ("'infinity'::timestamptz", "timestamptz"),
    ("'1999-12-31'::date", "date"),
    ("'1066-10-14'::date", "date"),
    ("'0044-03-15 BC'::date", "date"),
    ("'-infinity'::date", "date"),
    ("1e-7::float8", "float8"),
    ("1e100::float8", "float8"),
    ("-2.5::float8", "float8"),
    ("'NaN'::float8", "float8"),
    ("1.5::float4", "float4"),
    ("1e6::float4", "float4"),
    ("true", "bool"),
    ("false", "bool"),
    ("'pg_class'::name", "name"),
    ("'a b  c'::text", "text"),
    ("42::int4", "int4"),
    ("(-2147483648)::int4", "int4"),
    ("-7::int2", "int2"),
    ("9000000000::int8", "int8"),
    ("26::oid", "oid"),
    ("4294967295::oid", "oid"),
];

/// `at_break` at printtup.
fn at_printtup(
    cl: &Cluster,
    client: &mut Client,
    pid: i32,
    sql: &str,
    cmds: &[&str],
) -> (i32, String, String) {
    at_break(cl, client, pid, "printtup", sql, cmds)
}

fn print_datums(major: u32) {
    let cl = Cluster::start(major);
    let mut target = cl.connect();
    let pid = target.pid();
    let mut sql = cl.connect();
    sql.exec("set timezone = 'UTC'");

    // every value as a column of one row: printtup's slot holds the Datums
    let expected: Vec<String> = VALUES
        .iter()
        .map(|(v, _)| sql.simple_text(&format!("select ({v})::text")))
        .collect();
    let cols: Vec<&str> = VALUES.iter().map(|(v, _)| *v).collect();
    let select = format!("select {}", cols.join(", "));
    let prints: Vec<String> = VALUES
        .iter()
        .enumerate()
        .map(|(i, (_, t))| format!("print slot->tts_values[{i}]::{t}"))
        .collect();
    let mut cmds: Vec<&str> = prints.iter().map(|s| s.as_str()).collect();
    let name_col = VALUES.iter().position(|(_, t)| *t == "name").unwrap();
    let text_col = VALUES.iter().position(|(_, t)| *t == "text").unwrap();
    let name_print = format!("print *(NameData *)slot->tts_values[{name_col}]");
    let text_print = format!("print (text *)slot->tts_values[{text_col}]");
    cmds.push(&name_print);
    cmds.push(&text_print);
    let (code, out, err) = at_printtup(&cl, &mut target, pid, &select, &cmds);
    assert_eq!(code, 0, "{out}\n{err}");
    let got = print_values(&out);
    assert_eq!(got.len(), VALUES.len() + 2, "{out}");
    for (i, (v, t)) in VALUES.iter().enumerate() {
        assert_eq!(got[i], expected[i], "{v} as ::{t}\n{out}");
    }
    // NameData: its string; text *: the pointer and its characters
    assert_eq!(got[VALUES.len()], "\"pg_class\"", "{out}");
    let t = &got[VALUES.len() + 1];
    assert!(
        t.starts_with("(text *) 0x") && t.ends_with(" \"a b  c\""),
        "{out}"
    );

    // a table's tuple: short varlenas (1-byte headers) in the buffer, a
    // compressed text and a TOAST pointer; read after printtup deformed
    // the tuple (`finish`, the slot kept as $1)
    sql.exec(
        "create table datums (n numeric, s text, nm name, z text, ext text);
         insert into datums select -0.5, 'short text', 'relname', repeat('x', 100000),
           (select string_agg(md5(i::text), '') from generate_series(1, 2000) i)",
    );
    let want_n = sql.simple_text("select n::text from datums");
    let want_s = sql.simple_text("select s from datums");
    let (code, out, err) = at_printtup(
        &cl,
        &mut target,
        pid,
        "select * from datums",
        &[
            "print slot",
            "finish",
            "print $1->tts_values[0]::numeric",
            "print $1->tts_values[1]::text",
            "print $1->tts_values[2]::name",
            "print/x *(unsigned char *)$1->tts_values[0]",
            "print (text *)$1->tts_values[3]",
            "print (text *)$1->tts_values[4]",
        ],
    );
    assert_eq!(code, 0, "{out}\n{err}");
    let got = print_values(&out);
    assert_eq!(got.len(), 7, "{out}");
    assert_eq!(got[1], want_n, "{out}");
    assert_eq!(got[2], want_s, "{out}");
    assert_eq!(got[3], "relname", "{out}");
    // the numeric's header is a 1-byte one (its low bit set)
    let h = u8::from_str_radix(got[4].trim_start_matches("0x"), 16).unwrap();
    assert_eq!(h & 1, 1, "{out}");
    assert!(got[5].contains("<compressed varlena"), "{out}");
    assert!(got[6].contains("<external (TOAST pointer)"), "{out}");

    // bad input: one line, a non-zero exit, the backend clean and running
    let e = one_line_error(pid, "print MyProcPid::nosuchtype");
    assert!(e.contains("unknown type 'nosuchtype'"), "{e}");
    let e = one_line_error(pid, "print/x MyProcPid::int4");
    assert!(e.contains("do not go together"), "{e}");
    for (cmd, needle) in [
        (
            format!("print slot->tts_values[{}]::numeric", VALUES.len() - 6),
            "is not a pointer to a numeric",
        ),
        ("print $1->tts_values[3]::text".to_string(), "is compressed"),
        ("print $1->tts_values[4]::text".to_string(), "TOAST pointer"),
    ] {
        let (query, pre) = if cmd.contains("$1") {
            ("select * from datums", vec!["print slot", "finish"])
        } else {
            (select.as_str(), vec![])
        };
        let mut cmds = pre;
        cmds.push(&cmd);
        let (code, out, err) = at_printtup(&cl, &mut target, pid, query, &cmds);
        assert_ne!(code, 0, "{cmd}: {out}");
        let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
        assert_eq!(lines.len(), 1, "{cmd}: {err}");
        assert!(lines[0].contains(needle), "{cmd}: {err}");
    }
    assert_eq!(target.simple_text("select 1"), "1");

    // info types: gdb's lines, from the debug info only
    let out = run(pid, &["info types ^NameData$"]);
    assert!(
        out.contains("\n\nFile ") && out.contains(":\ttypedef struct nameData NameData;"),
        "{out}"
    );
    // base types by gdb's names (`unsigned long`, not DWARF's `long
    // unsigned int`); every mapped library's too, as gdb lists them
    let out = run(pid, &["info types ^(unsigned )?long$"]);
    assert!(
        out.contains("\n\tunsigned long\n") && out.contains("\n\tlong\n"),
        "{out}"
    );
    assert!(!out.contains("long unsigned int"), "{out}");
    let e = one_line_error(pid, "info types (unclosed");
    assert!(e.contains("invalid regular expression"), "{e}");
    if gdb_there() {
        assert_same_as_gdb(
            pid,
            &cl.postgres_binary(),
            &[
                "info types ^Plan$",
                "info types Bitmapset",
                "info types NameData",
                "info types ^Plan",
                "info types ^varlena$",
                "info types Numeric",
                "info types ^bits8$",
                // headers generated in the build tree by their relative
                // names, once for all units
                "info types CoercionMethod",
                "info types SysFKRelationship",
            ],
            |l| l.to_string(),
            |l| l.to_string(),
        );
    }
    assert_eq!(tracer_pid(pid), 0);
}

#[test]
fn print_datums_15() {
    print_datums(15);
}

#[test]
fn print_datums_18() {
    print_datums(18);
}
