//! `pprint` of the running statement's Query and PlannedStmt, read from
//! memory only, names every node the backend's own `nodeToString` names
//! for the same statement: the server writes its trees to the log
//! (debug_print_parse, debug_print_plan), pgdbg prints them at breakpoints
//! in `planner` and `ExecutorStart`; nothing is called in the backend.
//! On 13, 15 and 18 (16 and 17 are the packages without debug info here:
//! pprint needs DWARF).

// scripts/test: needs PostgreSQL 13

use common::*;
use pgdbg_testbed as common;
use std::collections::BTreeSet;
use std::time::Duration;

const QUERY: &str = "select a, b, a + 1 from pp_t where a > 1 and b <> 'x' order by b limit 5";

/// The node names of a nodeToString dump: `{NAME` -> NAME, the names
/// 13 and 14 spell their own way as the struct's (RTE for RangeTblEntry,
/// AEXPR for A_Expr).
fn node_names(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut rest = text;
    while let Some(i) = rest.find('{') {
        rest = &rest[i + 1..];
        let name: String = rest
            .chars()
            .take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == '_')
            .collect();
        let name = match name.as_str() {
            "RTE" => "RANGETBLENTRY".to_string(),
            "AEXPR" => "A_EXPR".to_string(),
            _ => name,
        };
        if !name.is_empty() {
            out.insert(name);
        }
    }
    out
}

/// The DETAIL of the log's `LOG:  HEADER:` message for QUERY (up to its
/// STATEMENT line): the tree nodeToString wrote.
fn logged_tree(log: &str, header: &str) -> String {
    let mark = format!("LOG:  {header}:");
    for (at, _) in log.match_indices(&mark) {
        let tail = &log[at..];
        let Some(end) = tail.find("STATEMENT:") else {
            continue;
        };
        if tail[end..].starts_with(&format!("STATEMENT:  {QUERY}")) {
            return tail[..end].to_string();
        }
    }
    panic!("no '{header}:' for the query in the server log:\n{log}")
}

/// The text between `echo` markers in pgdbg's output.
fn between<'a>(out: &'a str, from: &str, to: &str) -> &'a str {
    let a = out
        .find(from)
        .unwrap_or_else(|| panic!("no {from} in:\n{out}"))
        + from.len();
    let b = out[a..].find(to).map(|b| a + b).unwrap_or(out.len());
    &out[a..b]
}

fn pprint_matches_node_to_string(major: u32) {
    let cl = Cluster::start(major);
    let mut a = cl.connect();
    a.exec("create table pp_t (a int, b text)");
    a.exec("insert into pp_t select g, g::text from generate_series(1, 100) g");
    a.exec("analyze pp_t");
    a.exec("set debug_print_parse = on");
    a.exec("set debug_print_plan = on");
    let pid = a.pid();
    let p = Pgdbg::spawn_attached(
        &[
            "attach",
            &pid.to_string(),
            "-q",
            "--ex",
            "break planner",
            "--ex",
            "break ExecutorStart",
            "--ex",
            "continue",
            "--ex",
            "echo ==PARSE==",
            "--ex",
            "pprint --depth 200 --width 10000 parse",
            "--ex",
            "echo ==END==",
            "--ex",
            "continue",
            "--ex",
            "echo ==PLAN==",
            "--ex",
            "pprint --depth 200 --width 10000 queryDesc->plannedstmt",
            "--ex",
            "echo ==END==",
            "--ex",
            "pprint --depth 2 queryDesc->plannedstmt",
            "--ex",
            "echo ==END==",
            "--ex",
            "print queryDesc->plannedstmt->planTree",
            "--ex",
            "print (Node *) queryDesc->plannedstmt",
            "--ex",
            "detach",
        ],
        pid,
    );
    wait_armed(pid, "ExecutorStart");
    let h = a.spawn_text(QUERY);
    let (c, out, err) = p.wait(Duration::from_secs(120));
    assert_eq!(c, 0, "{out}\n{err}");
    let rows = a.rejoin(h).unwrap();
    assert_eq!(rows.lines().count(), 5, "{rows}");

    let log = cl.log();
    let parse_log = logged_tree(&log, "parse tree");
    let plan_log = logged_tree(&log, "plan");
    let parse_out = between(&out, "==PARSE==", "==END==");
    let plan_out = between(&out, "==PLAN==", "==END==");

    // the log was read: the nodes this statement has are there
    let names = |t: &str| node_names(t).into_iter().collect::<Vec<_>>().join(" ");
    for n in [
        "QUERY",
        "RANGETBLENTRY",
        "FROMEXPR",
        "BOOLEXPR",
        "OPEXPR",
        "VAR",
        "CONST",
        "TARGETENTRY",
        "SORTGROUPCLAUSE",
    ] {
        assert!(
            node_names(&parse_log).contains(n),
            "{n} not in {}",
            names(&parse_log)
        );
    }
    for n in [
        "PLANNEDSTMT",
        "LIMIT",
        "SORT",
        "SEQSCAN",
        "TARGETENTRY",
        "VAR",
        "OPEXPR",
        "CONST",
        "RANGETBLENTRY",
    ] {
        assert!(
            node_names(&plan_log).contains(n),
            "{n} not in {}",
            names(&plan_log)
        );
    }
    for (what, logged, ours) in [
        ("Query", &parse_log, parse_out),
        ("PlannedStmt", &plan_log, plan_out),
    ] {
        let want = node_names(logged);
        let got = node_names(ours);
        assert!(
            want.len() >= 5,
            "{what}: too few nodes in the log: {want:?}\n{logged}"
        );
        let missing: Vec<&String> = want.difference(&got).collect();
        assert!(
            missing.is_empty(),
            "PostgreSQL {major}: pprint of the {what} misses {missing:?} that nodeToString names\n\
             nodeToString:\n{logged}\npgdbg:\n{ours}"
        );
    }
    // the shapes nodeToString has: the plan's root and its fields
    assert!(
        plan_out.trim_start().starts_with("{PLANNEDSTMT"),
        "{plan_out}"
    );
    assert!(plan_out.contains(":commandType CMD_SELECT"), "{plan_out}");
    assert!(plan_out.contains("{LIMIT"), "{plan_out}");
    assert!(plan_out.contains(":startup_cost "), "{plan_out}");
    assert!(plan_out.contains(":targetlist ("), "{plan_out}");
    assert!(parse_out.trim_start().starts_with("{QUERY"), "{parse_out}");
    assert!(parse_out.contains(":relid "), "{parse_out}");
    // the constant 'x' and the relation's name are read as strings
    assert!(parse_out.contains("\"pp_t\""), "{parse_out}");
    // a text Const's value is read from its varlena: 'x'
    assert!(parse_out.contains(" \"x\"\n"), "{parse_out}");
    // --depth cuts the tree
    let short = out.rsplit("==END==").nth(1).unwrap_or("");
    assert!(short.contains("...} (0x"), "{short}");
    assert!(short.lines().count() < plan_out.lines().count(), "{short}");
    // print of a node pointer names its tag
    let printed = print_values(&out);
    assert!(
        printed[0].contains("Plan *) 0x") && printed[0].ends_with(" [T_Limit]"),
        "{out}"
    );
    assert!(
        printed[1].starts_with("(Node *) 0x") && printed[1].ends_with(" [T_PlannedStmt]"),
        "{out}"
    );
    cl.assert_no_crash();
}

#[test]
fn pprint_matches_node_to_string_15() {
    pprint_matches_node_to_string(15);
}

#[test]
fn pprint_matches_node_to_string_18() {
    pprint_matches_node_to_string(18);
}

/// Wrong arguments are refused before attaching, in one line.
#[test]
fn pprint_arguments_checked_before_attaching() {
    let cl = Cluster::start(15);
    let mut a = cl.connect();
    let pid = a.pid();
    for (cmd, needle) in [
        ("pprint", "pprint needs an expression"),
        (
            "pprint --depth x parse",
            "pprint --depth needs a positive number",
        ),
        ("pprint --deep 3 parse", "unknown option '--deep'"),
    ] {
        let (c, _, err) = pgdbg(&["attach", &pid.to_string(), "-q", "--ex", cmd]);
        assert_one_line_error(c, &err, needle);
        assert_eq!(tracer_pid(pid), 0, "{cmd}");
    }
    // a global that is not a pointer (known once attached)
    let (c, _, err) = pgdbg(&["attach", &pid.to_string(), "-q", "--ex", "pprint MyProcPid"]);
    assert_one_line_error(c, &err, "not a pointer");
    // a NULL node is <>, as nodeToString writes it (read while the backend
    // runs: no stop)
    let out = common::ex::run(pid, &["pprint (Node *) 0"]);
    assert!(out.starts_with("<>"), "{out}");
    cl.assert_no_crash();
}

#[test]
fn pprint_matches_node_to_string_13() {
    pprint_matches_node_to_string(13);
}
