//! The operator's binary: `greeting-operator` runs it with the usual client
//! configuration (in-cluster, or `KUBECONFIG`); `greeting-operator crd`
//! prints the Greeting definition to apply first.

use kube::{Client, CustomResourceExt};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    if std::env::args().nth(1).as_deref() == Some("crd") {
        println!(
            "{}",
            serde_json::to_string_pretty(&greeting_operator::Greeting::crd())?
        );
        return Ok(());
    }
    greeting_operator::run(Client::try_default().await?).await;
    Ok(())
}
