//! The baseline of `bench/http.sh` (issue 15): a bare warp server that answers every POST
//! with its JSON body, parsed and serialized again. `cargo run --release --example echo
//! -- 127.0.0.1:8099`.

use warp::Filter;

#[tokio::main]
async fn main() {
    let addr: std::net::SocketAddr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:8099".into())
        .parse()
        .expect("an address such as 127.0.0.1:8099");
    let echo = warp::post()
        .and(warp::body::json())
        .map(|v: serde_json::Value| warp::reply::json(&v));
    warp::serve(echo).run(addr).await;
}
