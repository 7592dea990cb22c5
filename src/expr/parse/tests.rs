use super::*;

fn p(s: &str) -> Expr {
    parse(s, &|n| n == "CachedPlanSource").unwrap()
}

#[test]
fn arrows_and_members() {
    assert_eq!(
        p("plansource->generic_cost"),
        Expr::Arrow(
            Box::new(Expr::Ident("plansource".into())),
            "generic_cost".into()
        )
    );
    assert_eq!(
        p("*my_wait_event_info"),
        Expr::Deref(Box::new(Expr::Ident("my_wait_event_info".into())))
    );
}

#[test]
fn precedence() {
    let e = p("a->x / b->y + 1");
    match e {
        Expr::Binary(BinOp::Add, l, _) => assert!(matches!(*l, Expr::Binary(BinOp::Div, _, _))),
        other => panic!("{other:?}"),
    }
}

#[test]
fn casts() {
    assert_eq!(
        p("(CachedPlanSource *) 0x10"),
        Expr::Cast(
            TypeSpec {
                base: "CachedPlanSource".into(),
                pointers: 1
            },
            Box::new(Expr::Int(16))
        )
    );
    // not a type: a parenthesised expression
    assert_eq!(p("(x)"), Expr::Ident("x".into()));
    assert!(
        matches!(p("(unsigned long) 3"), Expr::Cast(TypeSpec { ref base, pointers: 0 }, _) if base == "unsigned long")
    );
}

/// Run `f` on a thread with a small stack: an unbounded recursion
/// overflows it and aborts the test process.
fn on_small_stack<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::Builder::new()
        .stack_size(1 << 20)
        .spawn(f)
        .unwrap()
        .join()
        .unwrap()
}

fn too_deep_msg() -> String {
    format!("expression nested too deeply (more than {MAX_DEPTH} levels)")
}

/// Row 1 of the hardening issue: 15 000 nested parentheses, 20 000
/// leading '-', long chains of '*', '&', casts, '->', '[i]', binary
/// operators: one clear error, no stack overflow.
#[test]
fn monster_expressions_are_refused_without_overflow() {
    let n = 20_000;
    let cases: Vec<String> = vec![
        format!("{}1{}", "(".repeat(15_000), ")".repeat(15_000)),
        format!("{}1", "-".repeat(n)),
        format!("{}x", "*".repeat(n)),
        format!("{}x", "& ".repeat(n)),
        format!("{}x", "!".repeat(n)),
        format!("{}x", "~".repeat(n)),
        format!("{}x", "- ".repeat(n)),
        format!("{}1", "(int)".repeat(n)),
        format!("{}1", "(long)-".repeat(n)),
        format!("{}x", "sizeof ".repeat(n)),
        format!("(int {})0", "*".repeat(n)),
        format!("x{}", "->a".repeat(n)),
        format!("x{}", ".a".repeat(n)),
        format!("x{}", "[0]".repeat(n)),
        format!("x{}", "[(0)]".repeat(n)),
        format!("1{}", "+1".repeat(n)),
        format!("1{}", "*2-3".repeat(n)),
        format!("x{}", " && y || z".repeat(n)),
        format!("{}1{}", "x[".repeat(n), "]".repeat(n)),
        format!("{}1{}", "(1+".repeat(n), ")".repeat(n)),
        format!("{}1{}", "-(".repeat(n), ")".repeat(n)),
    ];
    on_small_stack(move || {
        for c in &cases {
            let e = parse(c, &|t| t == "int" || t == "long").expect_err(&c[..40.min(c.len())]);
            assert_eq!(e.to_string(), too_deep_msg(), "{}", &c[..40]);
        }
    });
}

/// Just below the limit parses, and evaluates and drops on a small stack.
#[test]
fn deep_but_allowed_expressions_evaluate() {
    use crate::expr::eval::{eval, scalar};
    use crate::expr::testenv::Env;
    let d = MAX_DEPTH - 2;
    let cases: Vec<(String, i64)> = vec![
        (format!("{}7{}", "(".repeat(d), ")".repeat(d)), 7),
        (format!("{}7", "-".repeat(d)), 7),
        (format!("{}7", "- ".repeat(d + 1)), -7),
        (format!("1{}", "+1".repeat(d)), d as i64 + 1),
        (format!("{}7", "(long)".repeat(d)), 7),
        (
            format!("{}7{}", "-(".repeat(d / 2), ")".repeat(d / 2)),
            if (d / 2).is_multiple_of(2) { 7 } else { -7 },
        ),
        (
            format!("{}2{}", "(1+".repeat(d / 2), ")".repeat(d / 2)),
            2 + d as i64 / 2,
        ),
    ];
    on_small_stack(move || {
        for (c, want) in &cases {
            let e = parse(c, &|t| t == "long").unwrap_or_else(|e| panic!("{e}: {c}"));
            let v = eval(&Env, &e).unwrap();
            assert_eq!(scalar(&Env, &v).unwrap().as_i64(), *want, "{c}");
            let mut ids = Vec::new();
            identifiers(&e, &mut ids);
            let e2 = e.clone();
            assert_eq!(e, e2);
        }
    });
}

#[test]
fn non_ascii_is_read_by_character() {
    assert_eq!(p("café"), Expr::Ident("café".into()));
    assert_eq!(
        p("ñ->größe"),
        Expr::Arrow(Box::new(Expr::Ident("ñ".into())), "größe".into())
    );
    let e = parse("a § b", &|_| false).unwrap_err().to_string();
    assert_eq!(e, "unexpected character '§' in expression");
    let e = parse("a → b", &|_| false).unwrap_err().to_string();
    assert_eq!(e, "unexpected character '→' in expression");
    assert_eq!(p("\"é\""), Expr::Str("é".into()));
    assert_eq!(p("'é'"), Expr::Int('é' as u64));
    assert_eq!(p("'\\n'"), Expr::Int(10));
    assert_eq!(p("'#'"), Expr::Int('#' as u64));
}

#[test]
fn cast_to_an_unknown_type_names_it() {
    for s in [
        "(NoSuchType)1",
        "(NoSuchType) x",
        "(NoSuchType *)p",
        "(NoSuchType)(x)",
    ] {
        let e = parse(s, &|_| false).unwrap_err().to_string();
        assert_eq!(e, "no type named 'NoSuchType' in the debug info", "{s}");
    }
    let e = parse_inner(
        "(CachedPlanSorce *)p",
        &|_| false,
        Some(&|_| Some("CachedPlanSource".to_string())),
    )
    .unwrap_err()
    .to_string();
    assert!(e.ends_with("(did you mean CachedPlanSource?)"), "{e}");
    // still expressions: a parenthesised name before a binary operator
    assert!(matches!(p("(x) - 1"), Expr::Binary(BinOp::Sub, _, _)));
    assert!(matches!(p("(x) * y"), Expr::Binary(BinOp::Mul, _, _)));
    assert!(matches!(p("(x) & y"), Expr::Binary(BinOp::BitAnd, _, _)));
    assert_eq!(p("(x)"), Expr::Ident("x".into()));
}

#[test]
fn errors_are_clear() {
    let e = parse("a->", &|_| false).unwrap_err().to_string();
    assert!(e.contains("expected a field name"), "{e}");
    let e = parse("a ` b", &|_| false).unwrap_err().to_string();
    assert!(e.contains("unexpected character '`'"), "{e}");
    assert!(matches!(
        parse("a[0]@n+1", &|_| false).unwrap(),
        Expr::Binary(BinOp::At, _, _)
    ));
}
