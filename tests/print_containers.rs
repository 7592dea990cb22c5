//! `print` of PostgreSQL's containers on a live backend (15 and 18),
//! read from memory: a `List *` shows its tag, its length and its
//! elements (each node's tag, or the integers and OIDs of an IntList or
//! OidList), within gdb's 200 elements; a `Bitmapset *` its members; an
//! `Oid` the relcache holds its relation's name, and one it does not hold
//! no name.  What is expected comes from the server (the table's OID, the
//! columns' numbers), not from pgdbg.

use common::ex::*;
use common::*;
use pgdbg_testbed as common;

fn containers(major: u32) {
    let cl = Cluster::start(major);
    let mut target = cl.connect();
    let pid = target.pid();
    let mut sql = cl.connect();
    sql.exec("create table pc_t (a int, b text, c int); insert into pc_t values (1, 'x', 2)");
    let oid = sql.simple_text("select 'pc_t'::regclass::oid");
    let attnums = sql.simple_text(
        "select string_agg(attnum::text, ',' order by attnum) from pg_attribute \
         where attrelid = 'pc_t'::regclass and attname in ('a', 'b')",
    );
    // RangeTblEntry's (16+: RTEPermissionInfo's) selectedCols holds each
    // column's number minus FirstLowInvalidHeapAttributeNumber (-7 on
    // 13 to 18, access/sysattr.h)
    let selected: Vec<String> = attnums
        .split(',')
        .map(|n| (n.parse::<i32>().unwrap() + 7).to_string())
        .collect();
    let cols = if major >= 16 {
        "((RTEPermissionInfo *)estate->es_plannedstmt->permInfos->elements[0].ptr_value)->selectedCols"
    } else {
        "((RangeTblEntry *)estate->es_plannedstmt->rtable->elements[0].ptr_value)->selectedCols"
    };
    let relid = "((RangeTblEntry *)estate->es_plannedstmt->rtable->elements[0].ptr_value)->relid";
    let oid_cast = format!("print (Oid){oid}");
    let print_cols = format!("print {cols}");
    let print_relid = format!("print {relid}");
    let (code, out, err) = at_break(
        &cl,
        &mut target,
        pid,
        "ExecInitSeqScan",
        "select a, b, a + 1 from pc_t where a > 0",
        &[
            "print estate->es_plannedstmt->relationOids",
            "print estate->es_plannedstmt->rtable",
            "print node->scan.plan.targetlist",
            &print_cols,
            &print_relid,
            &oid_cast,
            "print (Oid)4000000000",
            "print node->scan.plan.initPlan",
            "print/x estate->es_plannedstmt->relationOids",
        ],
    );
    assert_eq!(code, 0, "{out}\n{err}");
    let v = print_values(&out);
    assert_eq!(v.len(), 9, "{out}");
    let named = format!("{oid} (relation pc_t)");
    assert!(
        v[0].starts_with("(List *) 0x")
            && v[0].ends_with(&format!(" [T_OidList] of length 1 = {{{named}}}")),
        "{out}"
    );
    assert!(
        v[1].contains(" [T_List] of length 1 = {0x") && v[1].ends_with(" [T_RangeTblEntry]}"),
        "{out}"
    );
    // three output columns, each a TargetEntry
    let (head, items) = v[2].split_once(" = {").unwrap_or_else(|| panic!("{out}"));
    assert!(head.ends_with(" [T_List] of length 3"), "{out}");
    let items: Vec<&str> = items.trim_end_matches('}').split(", ").collect();
    assert_eq!(items.len(), 3, "{out}");
    assert!(
        items
            .iter()
            .all(|i| i.starts_with("0x") && i.ends_with(" [T_TargetEntry]")),
        "{out}"
    );
    let want_cols = format!(" = {{{}}}", selected.join(", "));
    assert!(
        v[3].starts_with("(Bitmapset *) 0x") && v[3].ends_with(&want_cols),
        "{} wanted{want_cols}\n{out}",
        v[3]
    );
    assert_eq!(v[4], named, "{out}");
    assert_eq!(v[5], named, "{out}");
    // an OID the relcache does not hold: the number alone
    assert_eq!(v[6], "4000000000", "{out}");
    // NIL: the pointer alone
    assert_eq!(v[7], "(List *) 0x0", "{out}");
    // a format: gdb's text alone
    assert!(v[8].starts_with("0x") && !v[8].contains('['), "{out}");

    // a List longer than gdb's 200 elements: the first 200, then "..."
    let many: Vec<String> = (0..250).map(|i| format!("a + {i}")).collect();
    let (code, out, err) = at_break(
        &cl,
        &mut target,
        pid,
        "ExecInitSeqScan",
        &format!("select {} from pc_t", many.join(", ")),
        &["print node->scan.plan.targetlist"],
    );
    assert_eq!(code, 0, "{out}\n{err}");
    let v = print_values(&out);
    let (head, items) = v[0].split_once(" = {").unwrap_or_else(|| panic!("{out}"));
    assert!(head.ends_with(" [T_List] of length 250"), "{out}");
    assert!(items.ends_with(" [T_TargetEntry]...}"), "{out}");
    assert_eq!(items.matches("[T_TargetEntry]").count(), 200, "{out}");

    // an IntList: the result relations of an UPDATE (range table index 1)
    let (code, out, err) = at_break(
        &cl,
        &mut target,
        pid,
        "ExecInitModifyTable",
        "update pc_t set c = c + 1 where a = 1",
        &["print node->resultRelations"],
    );
    assert_eq!(code, 0, "{out}\n{err}");
    let v = print_values(&out);
    assert!(v[0].ends_with(" [T_IntList] of length 1 = {1}"), "{out}");
    assert_eq!(target.simple_text("select c from pc_t"), "3");
}

#[test]
fn containers_15() {
    containers(15);
}

#[test]
fn containers_18() {
    containers(18);
}
