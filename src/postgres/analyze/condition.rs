//! `--if` clauses: what they compare, parsed from their text, and whether
//! one holds.

use super::*;

/// What a `--if` clause compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Subject {
    /// The statement's execution time, in microseconds (known at its end).
    Duration,
    /// `PlannedStmt.queryId` (known at its start).
    QueryId,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Gt,
    Ge,
    Lt,
    Le,
    Eq,
    Ne,
}

/// One `--if` comparison: `duration > 200ms`, `queryid == -862731299`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Clause {
    pub subject: Subject,
    pub op: Op,
    /// Microseconds for a duration; the value for a queryId.
    pub value: i64,
}

impl Clause {
    pub(super) fn holds(&self, v: i64) -> bool {
        match self.op {
            Op::Gt => v > self.value,
            Op::Ge => v >= self.value,
            Op::Lt => v < self.value,
            Op::Le => v <= self.value,
            Op::Eq => v == self.value,
            Op::Ne => v != self.value,
        }
    }
}

/// Parse `--if`'s expression: clauses `duration OP TIME` (TIME with a unit:
/// us, ms, s) or `queryid OP INTEGER`, joined by `&&`.
pub fn parse_condition(text: &str) -> Result<Vec<Clause>> {
    let text = text.trim().trim_matches(|c| c == '\'' || c == '"').trim();
    if text.is_empty() {
        bail!(
            "plan --if needs a condition: duration > 200ms, queryid == N, joined by && (e.g. --if 'duration > 200ms')"
        );
    }
    let mut out = Vec::new();
    for part in text.split("&&") {
        let part = part.trim();
        let ops = [
            (">=", Op::Ge),
            ("<=", Op::Le),
            ("==", Op::Eq),
            ("!=", Op::Ne),
            (">", Op::Gt),
            ("<", Op::Lt),
        ];
        let Some((pos, sym, op)) = ops
            .iter()
            .find_map(|(sym, op)| part.find(sym).map(|p| (p, *sym, *op)))
        else {
            bail!(
                "plan --if: '{part}' is not a comparison: use duration > 200ms or queryid == N (operators > >= < <= == !=)"
            );
        };
        let (lhs, rhs) = (part[..pos].trim(), part[pos + sym.len()..].trim());
        let clause = match lhs.to_lowercase().as_str() {
            "duration" => Clause {
                subject: Subject::Duration,
                op,
                value: parse_micros(rhs)?,
            },
            "queryid" | "query_id" => Clause {
                subject: Subject::QueryId,
                op,
                value: rhs.parse::<i64>().map_err(|_| {
                    anyhow!(
                        "plan --if: queryid compares with an integer, not '{rhs}'",
                        rhs = crate::shown::shown(rhs)
                    )
                })?,
            },
            other => bail!(
                "plan --if: unknown name '{other}': use duration (the statement's execution time) or queryid"
            ),
        };
        out.push(clause);
    }
    Ok(out)
}

fn parse_micros(t: &str) -> Result<i64> {
    let t = t.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = (&t[..split], t[split..].trim());
    let v: f64 = num.parse().map_err(|_| {
        anyhow!(
            "plan --if: '{t}' is not a duration (e.g. 200ms, 1.5s, 500us)",
            t = crate::shown::shown(t)
        )
    })?;
    let scale = match unit {
        "us" => 1.0,
        "ms" => 1e3,
        "s" => 1e6,
        "" => bail!(
            "plan --if: the duration '{t}' needs a unit: us, ms or s",
            t = crate::shown::shown(t)
        ),
        other => bail!(
            "plan --if: unknown time unit '{other}' (us, ms or s)",
            other = crate::shown::shown(other)
        ),
    };
    Ok((v * scale).round() as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conditions_parse() {
        let c = parse_condition("'duration > 200ms'").unwrap();
        assert_eq!(
            c,
            vec![Clause {
                subject: Subject::Duration,
                op: Op::Gt,
                value: 200_000
            }]
        );
        let c = parse_condition("queryid == -5 && duration >= 1.5s").unwrap();
        assert_eq!(c.len(), 2);
        assert_eq!(c[0].subject, Subject::QueryId);
        assert_eq!(c[0].value, -5);
        assert_eq!(c[1].op, Op::Ge);
        assert_eq!(c[1].value, 1_500_000);
        assert!(c[1].holds(1_500_000) && !c[1].holds(1_499_999));
        for bad in [
            "",
            "duration > 200",
            "speed > 1ms",
            "duration 200ms",
            "queryid == x",
        ] {
            assert!(parse_condition(bad).is_err(), "{bad}");
        }
    }
}
