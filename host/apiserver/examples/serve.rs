//! Runs the embedded API server until Ctrl-C: `cargo run -p lethe-apiserver --example serve -- [DATA_DIR] [--tls]`.

use lethe_apiserver::{ApiServerConfig, start};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let tls = args.iter().any(|a| a == "--tls");
    let data_dir = args
        .iter()
        .find(|a| !a.starts_with("--"))
        .map(std::path::PathBuf::from);
    let listen = std::env::var("LISTEN")
        .ok()
        .and_then(|l| l.parse().ok())
        .unwrap_or_else(|| ApiServerConfig::default().listen);
    let server = start(ApiServerConfig {
        data_dir,
        listen,
        tls,
        ..Default::default()
    })
    .await?;
    println!("url: {}", server.url());
    if let Some(p) = server.kubeconfig_path() {
        println!("kubeconfig: {}", p.display());
    }
    tokio::signal::ctrl_c().await?;
    server.shutdown().await;
    Ok(())
}
