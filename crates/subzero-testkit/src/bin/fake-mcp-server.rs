//! A tiny MCP stdio server for tests of the worker's MCP client.
//!
//! `fake-mcp-server --tools a,b [--record DIR] [--grandchild]`
//!
//! - lists exactly the tools named in `--tools`; each answers `"<tool> ok: <arguments>"`,
//!   except `fail`, which answers with a tool error, and `slow`, which answers only after
//!   60 s — unless the client cancels the request first (`notifications/cancelled`), which
//!   it records as `slow cancelled`;
//! - with `--record DIR`: writes its environment (`NAME=VALUE` lines) to `DIR/env` and its pid
//!   to `DIR/pid` at start, and appends the name of every called tool to `DIR/calls`;
//! - with `--grandchild`: starts a copy of itself in `--idle` mode (sleeps forever) and writes
//!   that process's pid to `DIR/grandchild-pid`, so tests can check the whole tree is killed.

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde_json::{Value, json};

#[derive(Debug, Clone)]
struct Fake {
    tools: Vec<String>,
    record: Option<PathBuf>,
}

impl Fake {
    fn record_call(&self, name: &str) {
        let Some(dir) = &self.record else { return };
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join("calls"))
        {
            let _ = writeln!(f, "{name}");
        }
    }
}

impl ServerHandler for Fake {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("fake-mcp-server", "0.0.0"))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let schema = json!({
            "type": "object",
            "properties": { "text": { "type": "string" } }
        });
        let Value::Object(schema) = schema else {
            return Err(ErrorData::internal_error("schema is not an object", None));
        };
        let schema = Arc::new(schema);
        Ok(ListToolsResult {
            tools: self
                .tools
                .iter()
                .map(|name| Tool::new(name.clone(), format!("fake tool {name}"), schema.clone()))
                .collect(),
            ..Default::default()
        })
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let name = request.name.to_string();
        if !self.tools.contains(&name) {
            return Err(ErrorData::invalid_params(format!("no tool {name}"), None));
        }
        self.record_call(&name);
        if name == "slow" {
            tokio::select! {
                () = tokio::time::sleep(std::time::Duration::from_secs(60)) => {}
                () = context.ct.cancelled() => {
                    self.record_call("slow cancelled");
                    return Err(ErrorData::internal_error("cancelled", None));
                }
            }
        }
        let arguments = Value::Object(request.arguments.unwrap_or_default());
        let result = if name == "fail" {
            CallToolResult::error(vec![ContentBlock::text("fail: as asked")])
        } else {
            CallToolResult::success(vec![ContentBlock::text(format!("{name} ok: {arguments}"))])
        };
        Ok(result.into())
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--idle") {
        loop {
            std::thread::sleep(std::time::Duration::from_secs(3600));
        }
    }
    let value_of = |flag: &str| {
        args.iter()
            .position(|a| a == flag)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let tools: Vec<String> = value_of("--tools")
        .map(|t| {
            t.split(',')
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default();
    let record = value_of("--record").map(PathBuf::from);
    if let Some(dir) = &record {
        let env: String = std::env::vars_os()
            .map(|(k, v)| format!("{}={}\n", k.to_string_lossy(), v.to_string_lossy()))
            .collect();
        let _ = std::fs::write(dir.join("env"), env);
        let _ = std::fs::write(dir.join("pid"), std::process::id().to_string());
        if args.iter().any(|a| a == "--grandchild")
            && let Ok(exe) = std::env::current_exe()
            && let Ok(child) = std::process::Command::new(exe)
                .arg("--idle")
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::null())
                .spawn()
        {
            let _ = std::fs::write(dir.join("grandchild-pid"), child.id().to_string());
        }
    }
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("fake-mcp-server: no runtime: {e}");
            std::process::exit(2);
        }
    };
    let code = runtime.block_on(async {
        let server = Fake { tools, record };
        match server.serve(rmcp::transport::stdio()).await {
            Ok(running) => {
                let _ = running.waiting().await;
                0
            }
            Err(e) => {
                eprintln!("fake-mcp-server: {e}");
                1
            }
        }
    });
    std::process::exit(code);
}
