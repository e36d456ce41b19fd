//! P5: children. The operator over bases that each have three ConfigMap
//! children (applied, owned, watched), restarted over them once converged:
//! its footprint against a bare reflector of the same objects, and the
//! writes to the children a restart makes (the goal: none).

use super::{Bench, converge_timeout, progress, until_listed};
use crate::children_plugin::PER_TABLE;
use crate::objects::{self, Watch};
use crate::report::{Figure, Goal, Row};

/// The operator's flags for P5: ConfigMaps are allowed children.
const ARGS: &[&str] = &["--child-kinds", "v1/ConfigMap"];

impl Bench {
    /// P5 over `n` tables (each with an extension and three children).
    pub(super) async fn children(self, n: usize) -> anyhow::Result<Vec<Row>> {
        let (ns, data) = self.place("p5").await?;
        let sockets = tempfile::tempdir()?;
        progress(&format!(
            "P5: {n} tables, each with an extension and {PER_TABLE} ConfigMap children"
        ));
        objects::create(&self.client, &ns, 0..n).await?;
        let mut watch = Watch::tables(&self.client, &ns);
        let operator = self.setup.operator_with(&ns, sockets.path(), ARGS)?;
        let plugin = self.setup.children_plugin(&operator, &data, "p5")?;
        until_listed(&operator, true).await?;
        // Ready comes after the children are applied (the status lists them).
        watch
            .until(n, objects::is_ready, "Ready", converge_timeout(n))
            .await?;
        operator.stop(&self.work).await?;
        let bare = self.bare_reflector(&ns, (2 + PER_TABLE) * n, true).await?;
        let kplug = self.operator_restarted(&ns, sockets.path(), ARGS).await?;
        plugin.stop().await?;
        self.stop().await?;
        let case = format!("{n} tables + {n} extensions + {} children", PER_TABLE * n);
        let row = |measure, kplug: Figure, baseline: Option<Figure>, goal| Row {
            part: "P5",
            case: case.clone(),
            measure,
            kplug,
            baseline,
            goal,
        };
        Ok(vec![
            row(
                "RSS",
                Figure::Bytes(kplug.usage.rss),
                Some(Figure::Bytes(bare.usage.rss)),
                Goal::Ratio(1.5),
            ),
            row(
                "API requests from start until caught up",
                Figure::Count(kplug.requests),
                Some(Figure::Count(bare.requests)),
                Goal::None,
            ),
            row(
                "writes to the children on the restart",
                Figure::Count(kplug.child_writes),
                None,
                Goal::Zero,
            ),
        ])
    }
}
