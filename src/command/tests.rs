use super::*;
use crate::expr::format::Radix;

/// A command its entry runs: `entry` with the rest of the line `args`.
fn run(entry: &'static Entry, args: &str) -> Command {
    Invocation::command(entry, args)
}

#[test]
fn gdb_aliases() {
    assert_eq!(
        parse("b choose_custom_plan").unwrap(),
        run(&breakpoints::BREAK, "choose_custom_plan")
    );
    assert_eq!(parse("c").unwrap(), Command::Continue);
    assert_eq!(parse("bt 5").unwrap(), run(&data::BACKTRACE, "5"));
    assert_eq!(data::parse_backtrace("5").unwrap(), Some(5));
    assert_eq!(
        parse("p/x MyProc->pid").unwrap(),
        run(&data::PRINT, "/x MyProc->pid")
    );
    assert_eq!(
        data::parse_print("/x MyProc->pid").unwrap(),
        (Radix::Hex, "MyProc->pid".to_string())
    );
    assert_eq!(
        parse("i b").unwrap(),
        run(&breakpoints::INFO_BREAKPOINTS, "")
    );
    assert_eq!(parse("  # comment").unwrap(), Command::Nothing);
}

/// `#` starts a comment anywhere outside a string or character
/// literal; `print/x`, `break *0x...` and `$1` are not comments.
#[test]
fn trailing_comments() {
    assert_eq!(
        parse("print 1 + 2   # three").unwrap(),
        run(&data::PRINT, "1 + 2")
    );
    assert_eq!(parse("p/x $1# hex").unwrap(), run(&data::PRINT, "/x $1"));
    assert_eq!(
        parse("break *0x55d5c1e3c1a8 # an address").unwrap(),
        run(&breakpoints::BREAK, "*0x55d5c1e3c1a8")
    );
    assert_eq!(
        parse("break f if x == '#' # a char").unwrap(),
        run(&breakpoints::BREAK, "f if x == '#'")
    );
    assert_eq!(
        break_location(&parse("break f if x == '#' # a char").unwrap()).as_deref(),
        Some("f")
    );
    let printf = parse(r#"printf "%#x # not a comment \" # still not\n", v # comment"#).unwrap();
    let Command::Run(i) = &printf else {
        panic!("{printf:?}")
    };
    assert_eq!(
        data::parse_printf(&i.args).unwrap(),
        (
            "%#x # not a comment \" # still not\n".to_string(),
            vec!["v".to_string()]
        )
    );
    assert_eq!(parse("continue # go on").unwrap(), Command::Continue);
    assert_eq!(parse("#").unwrap(), Command::Nothing);
    assert_eq!(strip_comment("print 'a' # x"), "print 'a' ");
    assert_eq!(strip_comment("print '\\'' # x"), "print '\\'' ");
    assert_eq!(strip_comment("echo don't # x"), "echo don't ");
    assert_eq!(
        strip_comment("print \"unclosed # x"),
        "print \"unclosed # x"
    );
    assert_eq!(strip_comment("print é # x"), "print é ");
}

#[test]
fn errors_name_the_problem() {
    let e = parse("brk foo").unwrap_err().to_string();
    assert!(e.contains("unknown command 'brk'"), "{e}");
    let e = parse("break").unwrap_err().to_string();
    assert!(e.contains("needs a location"), "{e}");
    let e = parse("frame x").unwrap_err().to_string();
    assert!(e.contains("takes a number"), "{e}");
}

/// One command of each variant.  The match has no wildcard: a new variant
/// does not compile until it is listed here too.
fn one_of_each() -> Vec<Command> {
    use Command as C;
    let all = vec![
        C::Commands {
            id: None,
            body: vec![],
            text: vec![],
        },
        C::End,
        C::Silent,
        C::Continue,
        Invocation::command(&super::info::HELP, ""),
        C::Nothing,
    ];
    for c in &all {
        match c {
            C::Commands { .. } | C::End | C::Silent | C::Continue | C::Run(_) | C::Nothing => {}
        }
    }
    all
}

fn registered(e: &Entry) -> usize {
    entries().filter(|x| std::ptr::eq(*x, e)).count()
}

/// Each entry's examples parse (every line of a block) and the first line
/// of each gives a command whose check is that entry's; an entry without
/// examples is a group of subcommands that is no command itself.
#[test]
fn every_entry_parses_to_its_own_check() {
    for e in entries() {
        assert_eq!(registered(e), 1, "{} is registered once", e.name);
        if e.examples.is_empty() {
            assert!(!subcommands(e).is_empty(), "{} has examples", e.name);
            assert!(parse(e.name).is_err(), "{} alone is no command", e.name);
            continue;
        }
        for ex in e.examples {
            for l in ex.lines() {
                parse(l).unwrap_or_else(|err| panic!("{}: '{l}': {err}", e.name));
            }
            let first = ex.lines().next().unwrap();
            let cmd = parse(first).unwrap();
            let owner = cmd.entry().expect("not an empty line");
            assert!(
                std::ptr::eq(owner, e),
                "'{first}' (an example of {}) is checked by {}",
                e.name,
                owner.name
            );
            assert_eq!(
                matches!(cmd, Command::Run(_)),
                e.run.is_some(),
                "{}: a command that its entry runs has its run, and only that",
                e.name
            );
        }
    }
}

/// Every variant's entry is registered once, and its examples produce
/// that variant: no command a parser can give escapes the checks.
#[test]
fn every_variant_has_one_registered_entry() {
    use std::mem::discriminant;
    for c in one_of_each() {
        let Some(e) = c.entry() else {
            assert_eq!(c, Command::Nothing);
            continue;
        };
        assert_eq!(
            registered(e),
            1,
            "{c:?}: its entry {} is registered",
            e.name
        );
        let produced: Vec<Command> = e
            .examples
            .iter()
            .map(|ex| parse(ex.lines().next().unwrap()).unwrap())
            .collect();
        assert!(
            produced.iter().any(|p| discriminant(p) == discriminant(&c)),
            "{c:?}: the examples of {} produce it",
            e.name
        );
    }
}

/// Names, aliases and subcommands name one entry each.
#[test]
fn names_are_unique() {
    let mut seen = std::collections::HashSet::new();
    for e in entries() {
        let group = e.name.split_once(' ').map(|(g, _)| g).unwrap_or("");
        for n in
            std::iter::once(e.name.rsplit(' ').next().unwrap()).chain(e.aliases.iter().copied())
        {
            assert!(seen.insert((group, n)), "'{group} {n}' names two entries");
        }
        if !group.is_empty() {
            assert!(
                lookup(group).is_some(),
                "{}: its group is a command",
                e.name
            );
        }
    }
}

/// `help`'s list and every `help COMMAND` fit 100 columns, and `help`
/// finds abbreviations and subcommands.
#[test]
fn help_fits_100_columns() {
    let mut texts = vec![help_text(None)];
    for e in entries() {
        assert!(
            info::help_line(e).chars().count() <= 100,
            "{}",
            info::help_line(e)
        );
        let h = help_text(Some(e.name));
        assert!(h.starts_with(e.usage), "help {}: {h}", e.name);
        for ex in e.examples {
            assert!(
                h.contains(ex.lines().next().unwrap()),
                "help {} shows {ex}",
                e.name
            );
        }
        texts.push(h);
    }
    for t in &texts {
        for l in t.lines() {
            assert!(
                l.chars().count() <= 100,
                "{} columns: {l}",
                l.chars().count()
            );
        }
        assert!(!t.to_lowercase().contains("seed"), "{t}");
    }
    assert!(help_text(Some("i b")).starts_with("info breakpoints"));
    assert!(help_text(Some("waits trace")).starts_with("waits trace"));
    assert!(help_text(Some("cont")).starts_with("continue"));
    assert!(help_text(Some("info")).contains("info locals"));
    assert_eq!(
        help_text(Some("nope")),
        "no command 'nope': type 'help' for the list"
    );
}

/// Subcommands are parsed by their own entries; the errors are the same.
#[test]
fn subcommands_parse() {
    assert_eq!(
        parse("info registers").unwrap(),
        run(&data::INFO_REGISTERS, "")
    );
    assert_eq!(parse("i r").unwrap(), run(&data::INFO_REGISTERS, ""));
    assert_eq!(parse("info target").unwrap(), run(&info::INFO, "target"));
    assert_eq!(
        parse("info address  MyProc ").unwrap(),
        run(&data::INFO_ADDRESS, "MyProc")
    );
    let e = parse("info address").unwrap_err().to_string();
    assert_eq!(e, "info address needs a symbol name");
    let e = parse("info loc").unwrap_err().to_string();
    assert!(e.starts_with("unknown info subcommand 'loc'"), "{e}");
    let e = parse("waits").unwrap_err().to_string();
    assert!(e.starts_with("waits needs a subcommand"), "{e}");
    let e = parse("waits samples").unwrap_err().to_string();
    assert!(e.starts_with("waits needs a subcommand"), "{e}");
    assert_eq!(
        parse("waits trace --stacks 3 --for 2s").unwrap(),
        Invocation::command(&postgres::WAITS_TRACE, "--stacks 3 --for 2s")
    );
    assert_eq!(
        postgres::parse_waits_trace("--stacks 3 --for 2s").unwrap(),
        postgres::WaitsTraceArgs {
            duration: Some(std::time::Duration::from_secs(2)),
            stacks: 3,
            quiet: false,
            ptrace: false,
            no_statements: false,
            uprobes: false,
        }
    );
    assert_eq!(
        postgres::parse_waits_trace("--ptrace --no-statements").unwrap(),
        postgres::WaitsTraceArgs {
            duration: None,
            stacks: 0,
            quiet: false,
            ptrace: true,
            no_statements: true,
            uprobes: false,
        }
    );
    let e = parse("waits trace --stacks 65").unwrap_err().to_string();
    assert_eq!(e, "waits trace: --stacks takes 0 to 64 frames, not '65'");
    // a subcommand's alias is not a command's
    assert_eq!(
        parse("r").unwrap_err().to_string(),
        "unknown command 'r': type 'help' for the list of commands"
    );
}

/// An option given twice is refused in one line naming it, for every
/// command (the check sits in `parse`, before each command's parser);
/// expressions and conditions that merely look like options are not.
#[test]
fn repeated_options_are_refused() {
    for (line, opt) in [
        (
            "count f --for 2s --for 5s",
            "count: option --for given twice",
        ),
        (
            "latency f --for=2s --for 5s",
            "latency: option --for given twice",
        ),
        (
            "trace f --count 1 --count 2",
            "trace: option --count given twice",
        ),
        (
            "trace f --quiet --quiet",
            "trace: option --quiet given twice",
        ),
        (
            "plancache --for 1s --for 1s",
            "plancache: option --for given twice",
        ),
        (
            "plancache --fast=ring --fast=stop",
            "plancache: option --fast given twice",
        ),
        (
            "waits trace --stacks 2 --stacks 3",
            "waits trace: option --stacks given twice",
        ),
        (
            "waits sample --hz 9 --hz 10",
            "waits sample: option --hz given twice",
        ),
        (
            "profile --rows 5 --rows 6",
            "profile: option --rows given twice",
        ),
        (
            "plan --next --analyze --buffers --buffers",
            "plan: option --buffers given twice",
        ),
        (
            "plan --progress --every 1s --every 2s",
            "plan: option --every given twice",
        ),
    ] {
        let e = parse(line).unwrap_err().to_string();
        assert!(e.starts_with(opt), "{line}: {e}");
        assert!(!e.contains('\n'), "{e}");
    }
    for ok in [
        "plan --next --analyze --count 2 --if duration > 1ms && duration > 2ms",
        "print --x + --x",
        "count f --for 2s",
        "echo --for --for",
    ] {
        parse(ok).unwrap_or_else(|e| panic!("{ok}: {e}"));
    }
}

/// Control characters of the input are escaped where an error quotes it.
#[test]
fn quoted_input_has_no_raw_control_characters() {
    for line in [
        "\x1b[2Jbrk",
        "trace f --stacks \x07",
        "frame 1\x1b",
        "count f --for 2\x1bs",
        "delete 1 \x1b[31m",
    ] {
        let e = parse(line).unwrap_err().to_string();
        assert!(!e.chars().any(|c| c.is_control()), "{line:?}: {e:?}");
        assert!(
            e.contains("\\x1b") || e.contains("\\x07"),
            "{line:?}: {e:?}"
        );
    }
}

/// Every entry declares what its commands need of the backend, and that
/// is one of the kinds the non-stop prompt knows: an entry whose need
/// depends on the options answers a kind (never "it depends" again) for
/// each of its examples and for one command of each variant.
#[test]
fn every_entry_declares_what_it_needs() {
    let kinds = [
        Needs::Nothing,
        Needs::Memory,
        Needs::Stop,
        Needs::Runs,
        Needs::RunState,
        Needs::Detaches,
    ];
    let resolved = |e: &Entry, cmd: &Command| match e.needs {
        Needs::Varies(f) => f(cmd),
        n => n,
    };
    let mut commands: Vec<Command> = one_of_each();
    for e in entries() {
        for ex in e.examples {
            commands.push(parse(ex.lines().next().unwrap()).unwrap());
        }
    }
    for cmd in &commands {
        let Some(e) = cmd.entry() else {
            assert_eq!(cmd.needs(), Needs::Nothing, "an empty line");
            continue;
        };
        let n = resolved(e, cmd);
        assert!(
            kinds.contains(&n),
            "{cmd:?}: {} declares {n:?}, not one of {kinds:?}",
            e.name
        );
        assert_eq!(cmd.needs(), n, "{cmd:?}");
    }
    // a group of subcommands is no command: it needs nothing
    for e in entries().filter(|e| e.examples.is_empty()) {
        assert_eq!(e.needs, Needs::Nothing, "{}", e.name);
    }
}

#[test]
fn profile_wall_and_off_cpu_exclude_each_other() {
    let Ok(o) = profile::parse_profile("--wall --for 2s") else {
        panic!("profile --wall parses");
    };
    assert!(o.wall && !o.off_cpu);
    let e = profile::parse_profile("--off-cpu --wall")
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        "profile: --wall (time on and off a CPU) and --off-cpu (time off a CPU only) exclude each other"
    );
}

#[test]
fn profile_files_with_any_format_each_its_own() {
    let line = "profile --wall --format folded --speedscope w.json --pprof w.pb.gz";
    assert!(parse(line).unwrap().is(&profile::PROFILE));
    let Ok(o) = profile::parse_profile(line.strip_prefix("profile ").unwrap()) else {
        panic!("profile with both files parses");
    };
    assert_eq!(o.speedscope, Some("w.json".into()));
    assert_eq!(o.pprof, Some("w.pb.gz".into()));
    assert_eq!(o.format, crate::perf::profile_opts::Format::Folded);
    let e = parse("profile --pprof").unwrap_err().to_string();
    assert_eq!(e, "profile: --pprof takes a file name (OUT.pb.gz)");
    let e = parse("profile --flamegraph a --pprof a")
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        "profile: --pprof and --flamegraph both write a: give each its own file"
    );
    let e = parse("profile --speedscope a --speedscope b")
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("profile: option --speedscope given twice"),
        "{e}"
    );
}

#[test]
fn disassemble_takes_gdb_modifiers_and_ranges() {
    let d = |l: &str| {
        let c = parse(l).unwrap();
        let Command::Run(i) = &c else { panic!("{c:?}") };
        assert!(c.is(&inspect::DISASSEMBLE));
        inspect::parse_disassemble(&i.args).unwrap()
    };
    let cmd = |raw, source, spec: Option<&str>| (raw, source, spec.map(str::to_string));
    assert_eq!(d("disassemble"), cmd(false, false, None));
    assert_eq!(
        d("disassemble /r GetCachedPlan"),
        cmd(true, false, Some("GetCachedPlan"))
    );
    assert_eq!(
        d("disassemble/rs GetCachedPlan"),
        cmd(true, true, Some("GetCachedPlan"))
    );
    assert_eq!(d("disassemble /s /r $pc"), cmd(true, true, Some("$pc")));
    assert_eq!(d("disassemble &f, +16"), cmd(false, false, Some("&f, +16")));
    let e = parse("disassemble /x f").unwrap_err().to_string();
    assert!(e.contains("unknown modifier '/x'"), "{e}");
    use crate::expr::disasm::split_range;
    assert_eq!(split_range("&f, +16"), Some(("&f", "16", true)));
    assert_eq!(split_range("0x10,0x20"), Some(("0x10", "0x20", false)));
    assert_eq!(split_range("GetCachedPlan"), None);
}

#[test]
fn list_and_directory_parse() {
    assert_eq!(parse("list").unwrap(), run(&source::LIST, ""));
    assert_eq!(parse("l 10,20").unwrap(), run(&source::LIST, "10,20"));
    assert_eq!(parse("dir /tmp").unwrap(), run(&source::DIRECTORY, "/tmp"));
}

#[test]
fn info_functions_checks_its_regex_when_parsed() {
    assert_eq!(
        parse("info functions ^GetCachedPlan$").unwrap(),
        run(&inspect::INFO_FUNCTIONS, "^GetCachedPlan$")
    );
    let e = parse("info variables (unclosed").unwrap_err().to_string();
    assert!(
        e.starts_with("invalid regular expression \"(unclosed\""),
        "{e}"
    );
    assert_eq!(e.lines().count(), 1, "{e}");
}

/// The commands after which a `commands` block's expressions are no
/// longer in the breakpoint's function (script.rs checks them so).
#[test]
fn commands_that_select_another_frame() {
    for l in ["frame 1", "up", "down 2", "frame function PostgresMain"] {
        assert!(selects_frame(&parse(l).unwrap()), "{l}");
    }
    for l in ["bt", "print x", "info frame"] {
        assert!(!selects_frame(&parse(l).unwrap()), "{l}");
    }
}

#[test]
fn source_and_break_are_refused_in_a_commands_block() {
    let e = super::lines::assemble("s", "break f\ncommands\nsource x.gdb\nend\n")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("s:3: 'source' cannot run from a commands block"),
        "{e}"
    );
    let e = super::lines::assemble("s", "break f\ncommands\ndelete 1\nend\n")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("s:3: breakpoints cannot be set or deleted"),
        "{e}"
    );
}
