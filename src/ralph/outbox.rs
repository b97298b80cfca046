//! Where the run's facts go: every event is applied to the session, the
//! session file is saved at each state change, then the reporter shows it.
//! Saved first: whatever a reporter shows (a `--json` reader may act on it,
//! kill -9 included) is already in the session file.

use crate::model::{TaskId, TaskSet, TaskStatus};
use crate::ralph::event::{LoopEvent, NoticeLevel, Reporter, SessionFile};
use crate::ralph::session::{RunTaskState, Session, SessionError};
use std::collections::BTreeSet;
use std::path::PathBuf;

/// The session and its recorder together: what the steps before and after
/// the run (recovery, the preview) use. The run itself keeps the session in
/// its state machine and the recorder in its shell ([`Outbox::split`]).
pub struct Outbox<'a> {
    pub session: Session,
    pub rec: Recorder<'a>,
}

impl<'a> Outbox<'a> {
    pub fn new(
        session: Session,
        session_path: PathBuf,
        reporter: &'a mut dyn Reporter,
    ) -> Outbox<'a> {
        Outbox {
            session,
            rec: Recorder::new(session_path, reporter),
        }
    }

    /// The session was read from its file (a resume): that file is on disk
    /// until the first save replaces it.
    pub fn loaded_from_disk(&mut self) {
        self.rec.loaded_from_disk(&self.session);
    }

    pub fn emit(&mut self, event: LoopEvent) {
        self.session.apply(&event);
        self.rec.record(&mut self.session, &event);
    }

    pub fn save(&mut self) {
        self.rec.save(&mut self.session);
    }

    pub fn split(self) -> (Session, Recorder<'a>) {
        (self.session, self.rec)
    }
}

/// Saves the session file and passes events on to the reporter.
pub struct Recorder<'a> {
    pub session_path: PathBuf,
    pub reporter: &'a mut dyn Reporter,
    /// Why the last save failed, while saves fail.
    save_error: Option<String>,
    /// What the file on disk holds: when it was written (none: no file
    /// yet) and which tasks it records as completed.
    on_disk: Option<(String, BTreeSet<TaskId>)>,
    /// The last save's text, kept for its memory (see `save_changes`).
    buffer: String,
    /// The run's event journal (`spectr report` reads it).
    journal: Option<crate::ralph::run_journal::RunJournal>,
    /// `--notify`: called when a person is needed.
    notifier: Option<crate::ralph::notify::Notifier>,
    /// The events for watchers elsewhere (the control socket).
    hub: Option<crate::ralph::hub::Hub>,
}

impl<'a> Recorder<'a> {
    pub fn new(session_path: PathBuf, reporter: &'a mut dyn Reporter) -> Recorder<'a> {
        Recorder {
            session_path,
            reporter,
            save_error: None,
            on_disk: None,
            buffer: String::new(),
            journal: None,
            notifier: None,
            hub: None,
        }
    }

    /// From now on every event also goes to the run's journal, to the
    /// watchers' hub, and to the notify command when it calls for a person.
    pub fn attach(
        &mut self,
        journal: crate::ralph::run_journal::RunJournal,
        notifier: Option<crate::ralph::notify::Notifier>,
        hub: crate::ralph::hub::Hub,
    ) {
        self.journal = Some(journal);
        self.notifier = notifier;
        self.hub = Some(hub);
    }

    /// Shown: journaled and, when a person is needed, notified too.
    fn pass_on(&mut self, event: &LoopEvent) {
        self.reporter.report(event);
        if let Some(hub) = &self.hub {
            hub.publish(event);
        }
        if let Some(journal) = &mut self.journal
            && let Some(why) = journal.append(event)
        {
            self.reporter.report(&LoopEvent::Notice {
                level: NoticeLevel::Warn,
                message: format!("{why}; `spectr report` will miss the rest of this run"),
            });
        }
        if let Some(n) = &self.notifier {
            n.notify(event);
        }
    }

    pub fn loaded_from_disk(&mut self, session: &Session) {
        self.on_disk = Some((session.updated_at.clone(), session.completed()));
    }

    /// An event already applied to `session`: saved when it changes the
    /// state, then shown.
    pub fn record(&mut self, session: &mut Session, event: &LoopEvent) {
        if Session::is_state_change(event) {
            self.save(session);
        }
        self.pass_on(event);
    }

    /// Shows an event without recording it (a lane's view of a status).
    pub fn report(&mut self, event: &LoopEvent) {
        self.pass_on(event);
    }

    pub fn save(&mut self, session: &mut Session) {
        match session.save_changes(&self.session_path, &mut self.buffer) {
            Ok(changed) => {
                self.save_error = None;
                // Only the changed records can have moved in or out of
                // completed: the set is kept up to date without going
                // over every finished task at every save.
                let (at, completed) = self.on_disk.get_or_insert_with(Default::default);
                at.clone_from(&session.updated_at);
                for id in changed {
                    let done = session
                        .record(&id)
                        .is_some_and(|r| r.state == RunTaskState::Completed);
                    if done {
                        completed.insert(id);
                    } else {
                        completed.remove(&id);
                    }
                }
            }
            Err(e) => {
                let why = match &e {
                    SessionError::Io { source, .. } => source.to_string(),
                    other => other.to_string(),
                };
                if self.save_error.replace(why).is_none() {
                    // Say it once; keep running: the tasks file still records progress.
                    self.reporter.report(&LoopEvent::Notice {
                        level: NoticeLevel::Warn,
                        message: format!("{e}; resuming this run may repeat work"),
                    });
                }
            }
        }
    }

    /// What the session file holds now, and so what a resume will do, given
    /// the tasks files as they are (`tasks`).
    pub fn session_file(&self, session: &Session, tasks: &TaskSet) -> SessionFile {
        let in_tasks_file = |id: &TaskId| {
            tasks
                .task(id)
                .is_some_and(|t| t.status == TaskStatus::Completed)
        };
        let unwritten = match tasks.format {
            crate::model::TasksFormat::OpenSpecMarkdown => TaskStatus::Pending,
            _ => TaskStatus::InProgress,
        };
        let saved = self.save_error.is_none();
        let now = session.completed();
        let on_disk = match &self.on_disk {
            _ if saved => now.clone(),
            Some((_, completed)) => completed.clone(),
            None => BTreeSet::new(),
        };
        let runs_again = now
            .into_iter()
            .filter(|id| !on_disk.contains(id) && !in_tasks_file(id))
            .collect();
        SessionFile {
            path: self.session_path.display().to_string(),
            saved,
            error: self.save_error.clone(),
            saved_at: if saved {
                None
            } else {
                self.on_disk.as_ref().map(|(at, _)| at.clone())
            },
            runs_again,
            // Only the crash window's status is written back by a resume
            // (in_progress; an unticked box in tasks.md): a task put back
            // to pending by hand runs again.
            status_to_write: on_disk
                .into_iter()
                .filter(|id| tasks.task(id).is_some_and(|t| t.status == unwritten))
                .collect(),
            out_of_retries: Vec::new(),
        }
    }
}
