//! `pgdbg --version`: the version, the commit and target it was built
//! from (build.rs), how it is linked, and the PostgreSQL majors whose
//! layout packs are built in.

use crate::postgres::packs;

/// The text after "pgdbg " that `--version` prints.
pub fn long_version() -> String {
    let linked = if cfg!(target_feature = "crt-static") {
        "statically linked"
    } else {
        "dynamically linked"
    };
    let origins = packs::embedded_origins();
    let majors: Vec<String> = origins.iter().map(|(m, _)| m.to_string()).collect();
    let mut s = format!(
        "{}\ncommit: {}\ntarget: {}, {linked}\nPostgreSQL majors: {}\n\
         layout packs built in (for binaries without debug info):",
        env!("CARGO_PKG_VERSION"),
        env!("PGDBG_BUILD_COMMIT"),
        env!("PGDBG_BUILD_TARGET"),
        majors.join(", "),
    );
    for (m, origin) in origins {
        s.push_str(&format!("\n  {m}: symbols/pg{m}.json, from {origin}"));
    }
    s
}
