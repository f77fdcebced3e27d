//! What a bench that runs children and changes the host needs, always undone: children
//! pinned, bounded in time and stopped when their guard drops ([`proc`]); huge pages, a
//! hugetlbfs mount and network namespaces given back ([`host`]); the last resort for the
//! paths that skip `Drop` — Ctrl-C, a panic, a child past its time — ([`guard`]). Used whole by
//! `bench vhost` and `bench churn-compare`; every bench stops its children with
//! [`proc::terminate`].

pub mod guard;
pub mod host;
pub mod proc;
