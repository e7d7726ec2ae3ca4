mod common;
use parkway::*;
use serde_json::json;

#[tokio::test]
async fn smoke() {
    let (rt, _clock) = common::runtime().await;
    let rec = rt.run(Start::new("s", "asker")).await.unwrap();
    println!("{}", serde_json::to_string(&rec).unwrap());
    let list = rt.list("s").await.unwrap();
    println!("{}", serde_json::to_string(&list).unwrap());
    let out = rt.resume("s", &list[0].id, json!("yes")).await.unwrap();
    println!("{}", serde_json::to_string(&out).unwrap());
    rt.settle().await;
    println!("{:?}", rt.stats().await);
}
