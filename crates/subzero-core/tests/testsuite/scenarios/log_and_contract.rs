//! The scenario steps that are not lifecycle requests: the event log, templates and
//! policy limits.

use super::*;

impl Replay {
    /// A step of the event log.
    pub(super) fn event(&mut self, op: &Op) -> StepResult {
        match op {
            Op::EventAppend(input) => {
                let run = self.names.run(&input.run);
                let body = match input.kind.as_str() {
                    "run_started" => EventBody::RunStarted { run_id: run },
                    "text" => EventBody::Text {
                        run_id: run,
                        text: "x".repeat(input.text_bytes.expect("a text event needs textBytes")),
                        truncated: false,
                    },
                    other => panic!("unknown event kind {other}"),
                };
                let seq = self
                    .events
                    .append(0, body, &self.limits)
                    .map_err(|e| code(&e))?;
                Ok(json!({ "seq": seq.get() }))
            }
            Op::EventRead(input) => {
                let cursor = EventSeq::new(input.cursor);
                let page = self
                    .events
                    .read(cursor, input.limit)
                    .map_err(|e| code(&e))?;
                Ok(json!({
                    "seqs": page.events.iter().map(|e| e.seq.get()).collect::<Vec<_>>(),
                    "nextCursor": page.next_cursor.get(),
                    "oldestCursor": page.oldest_cursor.get(),
                    "gap": page.gap.map(|g| json!({"requested": g.requested.get(), "oldest": g.oldest.get()})),
                }))
            }
            other => unreachable!("{} is not a step of this group", other.name()),
        }
    }

    /// A step of templates and policy limits.
    pub(super) fn contract(&mut self, op: &Op) -> StepResult {
        match op {
            Op::FreezeTemplate(input) => {
                let user: BTreeMap<TemplateId, Template> = match &input.user_templates {
                    Some(v) => {
                        // Loading the configuration file checks it against its contract.
                        let file = json!({ "templates": v });
                        if !config_contract().is_valid(&file) {
                            return Err(ErrorCode::InvalidRequest);
                        }
                        serde_json::from_value(v.clone()).unwrap()
                    }
                    None => BTreeMap::new(),
                };
                let templates = Templates::new(user).map_err(|e| code(&e))?;
                let (id, template) = templates
                    .resolve(&input.template_id)
                    .map_err(|e| code(&e))?;
                let snapshot = GrantSnapshot::freeze(
                    id,
                    &template,
                    Vec::new(),
                    RunLimits::default(),
                    templates.tool_limits(&template),
                    &self.limits,
                )
                .map_err(|e| code(&e))?;
                Ok(json!({ "tools": snapshot.tools(), "writeCapable": snapshot.write_capable() }))
            }
            Op::CheckLimit(input) => {
                let limit = input.limit;
                let size = usize::try_from(input.value).unwrap();
                let l = &self.limits;
                let result = match limit {
                    LimitName::PromptBytes => l.check_prompt(&"x".repeat(size)),
                    LimitName::InstructionsBytes => l.check_instructions(&"x".repeat(size)),
                    LimitName::GrantedTools => l.check_granted_tools(size),
                    LimitName::EventPayloadBytes => l.check_event_payload(size),
                    LimitName::QueuedFollowups => l.check_queue(size),
                    // Protocol bounds the schemas declare (invalid_request), and the
                    // workspace slots (workspace_busy): not policy checks of a trace.
                    LimitName::GetWaitMs
                    | LimitName::OutputChunkBytes
                    | LimitName::ActiveWorkersPerWorkspace
                    | LimitName::WriteRunsPerWorkspace
                    | LimitName::EventRetention => {
                        panic!("{limit} is not a check_limit of the trace format")
                    }
                    LimitName::ModelResponseBytes
                    | LimitName::ToolArgumentBytes
                    | LimitName::ModelIdleTimeoutMs => {
                        panic!("{limit} is enforced by the worker, not by a request check")
                    }
                    LimitName::MaxTurns
                    | LimitName::DeadlineMs
                    | LimitName::ToolTimeoutMs
                    | LimitName::MaxOutputTokens
                    | LimitName::TokenBudget => {
                        panic!(
                            "{limit} is a spawn budget (`Budgets::resolve`), not a check_limit of the trace format"
                        )
                    }
                };
                result.map_err(|e| code(&e))?;
                Ok(json!({}))
            }
            other => unreachable!("{} is not a step of this group", other.name()),
        }
    }
}
