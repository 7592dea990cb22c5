//! Host names in the statically linked pgdbg (`scripts/release`).
//!
//! glibc's `getaddrinfo` follows `/etc/nsswitch.conf`'s `hosts:` line and
//! loads each service named there from `libnss_SERVICE.so.2`.  A static
//! executable can only load those modules with `dlopen` from the host's
//! own glibc, whose version is not the one pgdbg was linked with: at best
//! the lookup fails, at worst two glibcs share one process.  Since glibc
//! 2.34 the `files` (`/etc/hosts`) and `dns` (`/etc/resolv.conf`) services
//! are built into libc itself, the static one included; so the static
//! build asks for those two only, before its first lookup, and never
//! loads a module.  (mDNS, LDAP or systemd-resolved's `resolve` module are
//! thereby not asked; a `nameserver` line of resolv.conf still reaches
//! systemd-resolved's stub.)  The dynamically linked build keeps the
//! host's configuration.

/// Restrict host lookups to the services built into the static libc
/// (once; a no-op in a dynamically linked build).
pub fn builtin_services_only() {
    #[cfg(all(target_env = "gnu", target_feature = "crt-static"))]
    {
        static ONCE: std::sync::Once = std::sync::Once::new();
        ONCE.call_once(|| {
            unsafe extern "C" {
                // <nss.h>: overrides nsswitch.conf's line for one database
                fn __nss_configure_lookup(
                    db: *const libc::c_char,
                    service_line: *const libc::c_char,
                ) -> libc::c_int;
            }
            // SAFETY: two NUL-terminated literals; called once, before any
            // lookup of this process (every lookup goes through here first)
            let rc = unsafe { __nss_configure_lookup(c"hosts".as_ptr(), c"files dns".as_ptr()) };
            if rc != 0 {
                crate::runtime::sink().warn(format_args!(
                    "pgdbg: debuginfod: cannot limit host lookups to /etc/hosts and DNS; \
                     name lookups may fail: use an IP address in DEBUGINFOD_URLS"
                ));
            }
        });
    }
}
