//! A byte-splice forwarder, the yardstick of a proxy's own cost: every client connection gets
//! its own upstream connection and one task copying both ways (tokio's `copy_bidirectional`),
//! nothing parsed.

use anyhow::Result;
use tokio::net::{TcpListener, TcpStream};

/// Accepts on `listen` and splices every connection to `upstream`, until the process ends.
pub async fn serve(listen: &str, upstream: &str) -> Result<()> {
    let l = TcpListener::bind(listen).await?;
    loop {
        let (mut c, _) = l.accept().await?;
        let upstream = upstream.to_owned();
        tokio::spawn(async move {
            let _ = c.set_nodelay(true);
            if let Ok(mut u) = TcpStream::connect(&upstream).await {
                let _ = u.set_nodelay(true);
                let _ = tokio::io::copy_bidirectional(&mut c, &mut u).await;
            }
        });
    }
}
