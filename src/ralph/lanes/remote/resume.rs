//! Bringing a remote attempt's work home: right after its worker ended, or
//! on the resume after this run died while the worker went on (the worker
//! finishes and pushes its work even when its coordinator is gone).

use super::TRANSFER_TIMEOUT;
use super::order::{LaneResult, Order};
use crate::checkpoint::Checkpointer;
use crate::ralph::event::Outcome;

/// A remote attempt's work, fetched into this work tree's refs.
pub struct Fetched {
    /// The lane's tree when the attempt ended.
    pub tree: String,
    /// Where a failed attempt's work is kept here.
    pub failed: Option<String>,
}

/// Fetches the refs `result` names into this work tree's refs for the
/// attempt (`…/<task>/<attempt>/remote-result`, `…/remote-failed`).
pub fn fetch_result(
    user: &Checkpointer,
    change: &str,
    order: &Order,
    result: &LaneResult,
) -> Result<Fetched, String> {
    let Some(commit) = &result.result else {
        return Err("the lane worker named no result".into());
    };
    fetch(
        user,
        change,
        &order.remote,
        &order.prefix,
        order.task.as_str(),
        order.attempt,
        commit,
        result.failed.is_some(),
    )
}

#[allow(clippy::too_many_arguments)]
fn fetch(
    user: &Checkpointer,
    change: &str,
    remote: &str,
    prefix: &str,
    task: &str,
    attempt: u32,
    commit: &str,
    with_failed: bool,
) -> Result<Fetched, String> {
    let local = user.fetched_ref_name(change, task, attempt, "result");
    let local_failed = user.fetched_ref_name(change, task, attempt, "failed");
    let mut refs = vec![(format!("{prefix}/result"), local.clone())];
    if with_failed {
        refs.push((format!("{prefix}/failed"), local_failed.clone()));
    }
    user.fetch_from(remote, &refs, TRANSFER_TIMEOUT)
        .map_err(|e| {
            format!("cannot fetch the lane's work from the lanes' remote {remote}: {e}")
        })?;
    let tree = user
        .tree_of(&local)
        .map_err(|e| format!("the lane's work fetched from {remote} is unreadable: {e}"))?;
    let got = user.resolve_commit(&local).ok().flatten();
    if got.as_deref() != Some(commit) {
        return Err(format!(
            "{prefix}/result on {remote} is not the commit the lane worker pushed ({commit})"
        ));
    }
    Ok(Fetched {
        tree,
        failed: with_failed.then_some(local_failed),
    })
}

/// A remote attempt that was in flight when this run died, as its remote
/// says it ended: None when its worker pushed no result (it died too, or
/// still runs).
pub struct Finished {
    pub outcome: Outcome,
    pub fetched: Fetched,
}

/// Looks on the remote for what the worker of a remote attempt pushed, and
/// fetches it. `Ok(None)`: nothing there yet.
pub fn fetch_finished(
    user: &Checkpointer,
    change: &str,
    remote: &str,
    prefix: &str,
    task: &str,
    attempt: u32,
) -> Result<Option<Finished>, String> {
    let refs = user
        .remote_refs(remote, prefix, TRANSFER_TIMEOUT)
        .map_err(|e| format!("cannot read the lanes' remote {remote}: {e}"))?;
    let find = |what: &str| {
        let name = format!("{prefix}/{what}");
        refs.iter()
            .find(|(_, r)| *r == name)
            .map(|(oid, _)| oid.clone())
    };
    let Some(commit) = find("result") else {
        return Ok(None);
    };
    let fetched = fetch(
        user,
        change,
        remote,
        prefix,
        task,
        attempt,
        &commit,
        find("failed").is_some(),
    )?;
    let local = user.fetched_ref_name(change, task, attempt, "result");
    let message = user
        .commit_message(&local)
        .map_err(|e| format!("cannot read the lane's result: {e}"))?;
    // The outcome is the message's last non-empty line (see the worker).
    let outcome = message
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .and_then(|l| serde_json::from_str::<Outcome>(l).ok())
        .ok_or_else(|| format!("the lane's result at {prefix}/result names no outcome"))?;
    Ok(Some(Finished { outcome, fetched }))
}
