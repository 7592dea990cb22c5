//! `info wait-sites`: the stores of the wait-event word in the binary
//! (the inventory an in-process wait recorder would patch), from the code
//! alone and compared with DWARF.  Reads the binary's file only.

use crate::debuginfo::wordstores::Value;
use crate::postgres::Backend;
use crate::postgres::backend::Outcome;
use crate::postgres::waits::WaitNames;
use crate::postgres::waitsites::{inventory, site_json, site_line, summary};
use anyhow::{Result, bail};

/// How much is shown.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Form {
    Summary,
    Verbose,
    Json,
}

pub fn parse_form(rest: &str) -> Result<Form> {
    let mut form = Form::Summary;
    for w in rest.split_whitespace() {
        form = match w {
            "-v" | "--verbose" => Form::Verbose,
            "--json" => Form::Json,
            other => bail!(
                "info wait-sites: unknown argument '{}': give -v (one line per store) or --json",
                crate::shown::shown(other)
            ),
        };
    }
    Ok(form)
}

pub fn info_wait_sites(b: &mut dyn Backend, rest: &str) -> Result<Outcome> {
    let form = parse_form(rest)?;
    let di = b.di();
    let bias = b.bias();
    let inv = inventory(di)?;
    let names = WaitNames::load(&di.build_id);
    let name_of = |v: &Value| match v {
        Value::Imm(i) => match names.describe(*i) {
            (Some(t), Some(e)) => Some(format!("{t} {e}")),
            _ => None,
        },
        Value::Reg(_) => None,
    };
    let text = match form {
        Form::Summary => summary(di, &inv),
        Form::Verbose => {
            let mut s = summary(di, &inv);
            for site in &inv.scan.sites {
                s.push('\n');
                s.push_str(&site_line(di, bias, site, name_of(&site.value).as_deref()));
            }
            s
        }
        Form::Json => {
            let sites: Vec<serde_json::Value> = inv
                .scan
                .sites
                .iter()
                .map(|x| site_json(di, bias, x, name_of(&x.value).as_deref()))
                .collect();
            let (only_code, only_dwarf) = inv.differences().unwrap_or_default();
            let hex = |v: &[u64]| -> Vec<String> {
                v.iter().map(|a| format!("{:#x}", a + bias)).collect()
            };
            serde_json::json!({
                "word": inv.word,
                "classified": inv.scan.classified(),
                "dwarf": inv.dwarf.is_some(),
                "only_in_code": hex(&only_code),
                "only_in_dwarf": hex(&only_dwarf),
                "sites": sites,
            })
            .to_string()
        }
    };
    Ok(Outcome::shows(text))
}
