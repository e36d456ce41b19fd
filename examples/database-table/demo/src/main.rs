//! `kplug-demo` (run by `make demo`): the database-table walkthrough, live.
//!
//! It starts a local Kubernetes control plane (kube-testenv), installs the
//! example's CRDs, runs the generic `kplug-operator` and the SQLite plugin
//! as sidecar-style processes sharing one socket dir, applies the sample
//! `users` table (which prefers MariaDB), shows it converge to SQLite with
//! its status and the real SQLite schema, edits a column and shows the
//! change. The MariaDB and PostgreSQL plugins join when their servers are
//! configured (`KPLUG_MARIADB_DSN`, `KPLUG_POSTGRES_DSN`).

mod cluster;
mod processes;
mod show;

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Result;
use clap::Parser;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use serde_json::json;

use show::{print_status, step, wait_ready};

/// Runs the kplug database-table walkthrough on a local control plane.
#[derive(Debug, Parser)]
#[command(name = "kplug-demo", version)]
struct Args {
    /// Keep everything running at the end (until Ctrl-C) and print how to
    /// reach the control plane
    #[arg(long)]
    keep: bool,
    /// Where logs, sockets and the SQLite files go
    #[arg(long, default_value = "target/demo")]
    work_dir: PathBuf,
}

#[tokio::main]
async fn main() -> Result<()> {
    let args = Args::parse();
    let work = std::path::absolute(&args.work_dir)?;
    let _ = std::fs::remove_dir_all(&work);
    let sqlite_dir = work.join("sqlite");
    std::fs::create_dir_all(&sqlite_dir)?;

    step(
        1,
        "starting a local Kubernetes control plane (kube-apiserver + etcd)",
    );
    let (control_plane, client) = cluster::start().await?;
    let kubeconfig = control_plane.kubeconfig_path().to_owned();

    step(
        2,
        "starting kplug-operator and the plugins (sidecar-style, one socket dir)",
    );
    let processes = processes::start(&work, &kubeconfig)?;

    step(
        3,
        "applying examples/database-table/samples/users.yaml (prefers MariaDB)",
    );
    let ns = "default";
    cluster::apply_sample(&client, ns).await?;

    step(4, "watching users converge");
    let api = Api::<DynamicObject>::namespaced_with(client.clone(), ns, &cluster::table_resource());
    let users = wait_ready(&api, "users", 1).await?;
    print_status(&users)?;
    let db = sqlite_dir.join("authorization-cluster.db");
    show::table(&db, &format!("\n    the real table in {}:", db.display()))?;

    step(
        5,
        "editing users: id becomes int64, column email (string) is added",
    );
    let columns = json!([{"name": "id", "type": "int64"}, {"name": "name", "type": "string"}, {"name": "email", "type": "string"}]);
    api.patch(
        "users",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"columns": columns}})),
    )
    .await?;
    let users = wait_ready(&api, "users", 2).await?;
    print_status(&users)?;
    show::table(&db, "    the real table now:")?;

    step(6, "events recorded for users");
    show::events(&client, ns, "users").await?;

    if args.keep {
        keep_running(&kubeconfig).await?;
    }
    println!("\nstopping the plugins, the operator and the control plane...");
    processes.stop(Duration::from_secs(15)).await;
    drop(control_plane);
    println!("demo done.");
    println!(
        "next: write your own kind and plugin (docs/your-own-kind.md), or run \
         `target/debug/kplug-demo --keep` to keep this one running and look around \
         (kubectl, kubectl kplug why)."
    );
    Ok(())
}

/// `--keep`: says how to reach the control plane, and waits for Ctrl-C.
async fn keep_running(kubeconfig: &Path) -> Result<()> {
    println!(
        "\nEverything keeps running. In another shell:\n    export KUBECONFIG={}\nCtrl-C stops it all.",
        kubeconfig.display()
    );
    tokio::signal::ctrl_c().await?;
    Ok(())
}
