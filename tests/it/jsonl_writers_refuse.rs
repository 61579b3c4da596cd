//! A log with a corrupt middle line is refused by its writers as by its
//! readers: `job create` on a corrupt `jobs/audit.jsonl` fails naming the
//! file and line, commits nothing and appends nothing.

use crate::common;

use common::{Drover, stderr};

/// Guards issue 24 item 16: `job create` refuses an audit log whose middle
/// line is corrupt, before it commits the job.
#[test]
fn job_create_refuses_a_corrupt_audit_log_and_commits_nothing() {
    let d = Drover::new();
    d.ok(&["job", "create", "J1"]);
    let audit = d.state.join("jobs/audit.jsonl");
    let mut bytes = std::fs::read(&audit).unwrap();
    let first_end = bytes.iter().position(|b| *b == b'\n').unwrap() + 1;
    bytes.splice(first_end..first_end, b"not a record\n".iter().copied());
    std::fs::write(&audit, &bytes).unwrap();
    let out = d.run(&["job", "create", "J2"]);
    let e = stderr(&out);
    assert!(!out.status.success(), "{e}");
    assert!(e.contains("audit.jsonl") && e.contains("line 2"), "{e}");
    assert_eq!(std::fs::read(&audit).unwrap(), bytes, "nothing appended");
    assert!(
        !d.run(&["job", "show", "J2"]).status.success(),
        "J2 was not committed"
    );
}
