//! Panics as stable messages: what a quarantined record's reject and a failed task's
//! commit record say, identical on every attempt (so `job.max_attempts` counts equal
//! failures). Layer 0: used by the worker and the dedup subsystem alike.

/// A panic's message without what differs between attempts (addresses): the
/// payload's text, `0x…` for hex numbers.
pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    let text = if let Some(s) = payload.downcast_ref::<&str>() {
        s
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.as_str()
    } else {
        "a panic without a message"
    };
    static HEX: std::sync::LazyLock<regex::Regex> =
        std::sync::LazyLock::new(|| regex::Regex::new(r"0x[0-9a-fA-F]+").expect("regex"));
    HEX.replace_all(text, "0x…").into_owned()
}

/// A blocking task's failure as a stable message: a panic's message, never tokio's
/// task id (which differs on every attempt and would defeat `job.max_attempts`).
pub fn join_error(what: &str, e: tokio::task::JoinError) -> String {
    match e.try_into_panic() {
        Ok(p) => format!("{what} panicked: {}", panic_message(p.as_ref())),
        Err(_) => format!("{what} was cancelled"),
    }
}
