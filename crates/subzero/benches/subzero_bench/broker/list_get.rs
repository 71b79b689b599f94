//! `subzero_list` and `subzero_get` round trips through a broker on a populated database.

use std::time::Instant;

use serde_json::json;

use crate::Fail;
use crate::env::{BenchEnv, ok};
use crate::stats::{Samples, ms_since};

/// `subzero_list` and `subzero_get` through a broker on the populated database.
pub struct ListGet {
    pub list_ms: Samples,
    pub list_200_ms: Samples,
    pub get_ms: Samples,
}

pub async fn list_and_get(
    env: &BenchEnv,
    children: &[String],
    runs: usize,
) -> Result<ListGet, Fail> {
    let s = env.broker().await?;
    let mut out = ListGet {
        list_ms: Samples::default(),
        list_200_ms: Samples::default(),
        get_ms: Samples::default(),
    };
    for i in 0..runs {
        let start = Instant::now();
        let listed = ok(&s, "subzero_list", json!({})).await?;
        out.list_ms.push(ms_since(start));
        if listed["children"].as_array().is_none_or(Vec::is_empty) {
            return Err(format!("subzero_list saw no children: {listed}").into());
        }
        let start = Instant::now();
        ok(&s, "subzero_list", json!({"limit": 200})).await?;
        out.list_200_ms.push(ms_since(start));
        let child = &children[(children.len() / 2 + i * 97) % children.len()];
        let start = Instant::now();
        ok(
            &s,
            "subzero_get",
            json!({"childId": child, "eventLimit": 50}),
        )
        .await?;
        out.get_ms.push(ms_since(start));
    }
    s.close().await?;
    Ok(out)
}
