//! The MCP tasks handed out: a task is its run (same id), so a row holds only the handle —
//! which call made it, the answer that call would have given, and when. Its status is
//! always read from its run (`subzero_core::task`), so a restarted broker answers for it.

use subzero_core::task::{TaskClock, TaskStatus};

use super::*;

/// The calls that hand out a task, as stored.
pub const TASK_TOOLS: [&str; 3] = ["subzero_spawn", "subzero_send", "subzero_resume"];

/// A task and its run as one read sees them.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct TaskRow {
    /// The task, which is its run.
    pub run_id: RunId,
    /// The run's child.
    pub child_id: ChildId,
    /// The call that made it (one of [`TASK_TOOLS`]).
    pub call: String,
    /// The answer that call would have given, as compact JSON.
    pub answer: String,
    /// When the handle was given.
    pub created_at: Timestamp,
    /// When the run last changed (its end, its start, or its admission), never before the
    /// handle was given.
    pub last_updated_at: Timestamp,
    /// The run's status.
    pub run_status: RunStatus,
    /// How long the task has been kept.
    pub clock: TaskClock,
}

impl TaskRow {
    /// The task's status: its run's, as the core maps it.
    pub fn status(&self) -> TaskStatus {
        TaskStatus::of(self.run_status)
    }
}

/// Milliseconds between two stored timestamps (`'now'` for the current time), as SQLite
/// computes them (never negative).
fn millis_between(from: &str, to: &str) -> String {
    format!("MAX(0, CAST(ROUND((julianday({to}) - julianday({from})) * 86400000.0) AS INTEGER))")
}

fn load_task(conn: &Connection, run: RunId) -> RuntimeResult<Option<TaskRow>> {
    let sql = format!(
        "SELECT t.task_id, t.child_id, t.call, t.answer, t.created_at, r.status, \
         MAX(t.created_at, COALESCE(r.ended_at, r.started_at, r.created_at)) AS last_updated_at, \
         {active} AS active_ms, \
         CASE WHEN r.ended_at IS NULL THEN NULL ELSE {settled} END AS settled_for_ms \
         FROM tasks t JOIN runs r ON r.run_id = t.task_id WHERE t.task_id = ?1",
        active = millis_between("t.created_at", "COALESCE(r.ended_at, 'now')"),
        settled = millis_between("r.ended_at", "'now'"),
    );
    let row = conn
        .query_row(&sql, params![Sql(run)], |r| {
            let active: i64 = r.get("active_ms")?;
            let settled: Option<i64> = r.get("settled_for_ms")?;
            Ok(TaskRow {
                run_id: r.col("task_id")?,
                child_id: r.col("child_id")?,
                call: r.get("call")?,
                answer: r.get("answer")?,
                created_at: r.col("created_at")?,
                last_updated_at: r.col("last_updated_at")?,
                run_status: r.col("status")?,
                clock: TaskClock {
                    active_ms: u64::try_from(active).unwrap_or(0),
                    settled_for_ms: settled.map(|ms| u64::try_from(ms).unwrap_or(0)),
                },
            })
        })
        .optional()?;
    Ok(row)
}

impl Store {
    /// Records the task handed out for `run`, a run of a child of `scope`, by `call` with
    /// `answer`, and reads it back. A call repeated with its `requestId` names the same run:
    /// its task is the one already kept.
    pub async fn open_task(
        &self,
        scope: &WorkspaceScope,
        run: RunId,
        call: &'static str,
        answer: String,
    ) -> RuntimeResult<TaskRow> {
        let scope = scope.clone();
        self.transact(move |tx, _| {
            let child: ChildId = tx
                .query_row(
                    "SELECT child_id FROM runs WHERE run_id = ?1",
                    params![Sql(run)],
                    |r| r.col("child_id"),
                )
                .optional()?
                .ok_or_else(|| RuntimeError::not_found("run", run))?;
            load_child_in(tx, &scope, child)?;
            let at = now(tx)?;
            tx.execute(
                "INSERT INTO tasks (task_id, child_id, call, answer, created_at) \
                 VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT (task_id) DO NOTHING",
                params![Sql(run), Sql(child), call, answer, Sql(at)],
            )?;
            load_task(tx, run)?
                .ok_or_else(|| RuntimeError::Internal(format!("task {run} was not kept")))
        })
        .await
    }

    /// The task that is run `run`, if one was handed out (of any scope: the caller checks
    /// the child's).
    pub async fn task(&self, run: RunId) -> RuntimeResult<Option<TaskRow>> {
        self.read(move |c| load_task(c, run)).await
    }

    /// The child of run `run`, if it is a stored run.
    pub async fn run_child(&self, run: RunId) -> RuntimeResult<Option<ChildId>> {
        self.read(move |c| {
            Ok(c.query_row(
                "SELECT child_id FROM runs WHERE run_id = ?1",
                params![Sql(run)],
                |r| r.col("child_id"),
            )
            .optional()?)
        })
        .await
    }

    /// Forgets an expired task (its run stays).
    pub async fn forget_task(&self, run: RunId) -> RuntimeResult<()> {
        self.transact(move |tx, _| {
            tx.execute("DELETE FROM tasks WHERE task_id = ?1", params![Sql(run)])?;
            Ok(())
        })
        .await
    }
}
