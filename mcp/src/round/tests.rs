use super::*;
use parkway::{Entry, EntryStatus, To};

fn ask(format: Option<&str>, payload: Option<Value>) -> Entry {
    let mut entry: Entry =
        serde_json::from_value(json!({"id": "i-1", "status": "asking"})).unwrap();
    entry.status = EntryStatus::Asking;
    entry.to = Some(To::Caller);
    entry.question = Some("q?".into());
    entry.answer_format = format.map(str::to_owned);
    entry.payload = payload;
    entry
}

fn requested(entry: &Entry) -> Value {
    let shape = shape(entry);
    serde_json::to_value(request(entry, &shape, None)).unwrap()["params"]["requestedSchema"].clone()
}

fn accepted(content: Value) -> Value {
    json!({"action": "accept", "content": content})
}

#[test]
fn each_format_asks_for_its_answer_and_reads_it_back() {
    let text = ask(None, None);
    assert_eq!(requested(&text)["properties"]["answer"]["type"], "string");
    assert_eq!(
        answer(&text, &shape(&text), &accepted(json!({"answer": "hi"}))),
        Answer::Resume(json!("hi"))
    );

    let confirm = ask(Some("confirm"), None);
    assert_eq!(
        requested(&confirm)["properties"]["answer"]["type"],
        "boolean"
    );
    assert_eq!(
        answer(
            &confirm,
            &shape(&confirm),
            &accepted(json!({"answer": false}))
        ),
        Answer::Resume(json!(false))
    );
    assert!(matches!(
        answer(
            &confirm,
            &shape(&confirm),
            &accepted(json!({"answer": "no"}))
        ),
        Answer::Invalid(_)
    ));

    let select = ask(Some("select"), Some(json!({"options": ["a", "b"]})));
    assert_eq!(
        requested(&select)["properties"]["answer"]["enum"],
        json!(["a", "b"])
    );
    let Answer::Invalid(why) = answer(&select, &shape(&select), &accepted(json!({"answer": "c"})))
    else {
        panic!("c is no option");
    };
    assert!(why.contains("not one of the options a, b"), "{why}");
}

#[test]
fn a_flat_form_goes_as_it_is_and_a_deep_one_as_json_text() {
    let flat = json!({"type": "object", "required": ["n"], "properties": {"n": {"type": "integer", "minimum": 1}}});
    let form = ask(Some("form"), Some(json!({"schema": flat})));
    assert_eq!(requested(&form), flat);
    assert_eq!(
        answer(&form, &shape(&form), &accepted(json!({"n": 2}))),
        Answer::Resume(json!({"n": 2}))
    );
    assert!(matches!(
        answer(&form, &shape(&form), &accepted(json!({"n": 0}))),
        Answer::Invalid(_)
    ));

    let deep = json!({"type": "object", "properties": {"tags": {"type": "object"}}});
    let form = ask(Some("form"), Some(json!({"schema": deep})));
    assert_eq!(requested(&form)["properties"]["json"]["type"], "string");
    let content = accepted(json!({"json": "{\"tags\": {\"a\": 1}}"}));
    assert_eq!(
        answer(&form, &shape(&form), &content),
        Answer::Resume(json!({"tags": {"a": 1}}))
    );
    let Answer::Invalid(why) = answer(&form, &shape(&form), &accepted(json!({"json": "{"}))) else {
        panic!("not JSON");
    };
    assert!(why.contains("not JSON"), "{why}");
    let nested = format!("{}{}", "[".repeat(500), "]".repeat(500));
    assert!(matches!(
        answer(&form, &shape(&form), &accepted(json!({"json": nested}))),
        Answer::Invalid(_)
    ));
}

#[test]
fn a_decline_or_cancel_refuses_and_anything_else_is_not_an_answer() {
    let text = ask(None, None);
    for action in ["decline", "cancel"] {
        assert!(matches!(
            answer(&text, &shape(&text), &json!({"action": action})),
            Answer::Refused(_)
        ));
    }
    for junk in [json!(null), json!({"action": "maybe"}), json!([1])] {
        assert!(matches!(
            answer(&text, &shape(&text), &junk),
            Answer::Invalid(_)
        ));
    }
    let marker = accepted(json!({"answer": {"interaction_expired": true}}));
    assert!(matches!(
        answer(&text, &shape(&text), &marker),
        Answer::Invalid(_)
    ));
}

#[test]
fn a_relayed_request_goes_as_it_is_and_its_result_is_the_answer() {
    let sampling = json!({"method": "sampling/createMessage", "params": {
        "messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}], "maxTokens": 10}});
    let entry = ask(None, Some(json!({"mcp": sampling})));
    let shape = shape(&entry);
    assert_eq!(shape.needs(), Needs::Sampling);
    assert_eq!(
        serde_json::to_value(request(&entry, &shape, None)).unwrap()["method"],
        "sampling/createMessage"
    );
    let result =
        json!({"role": "assistant", "content": {"type": "text", "text": "yo"}, "model": "m"});
    assert_eq!(
        answer(&entry, &shape, &result),
        Answer::Resume(result.clone())
    );
    assert!(matches!(
        answer(&entry, &shape, &json!({"nope": 1})),
        Answer::Invalid(_)
    ));

    let roots = ask(None, Some(json!({"mcp": {"method": "roots/list"}})));
    assert_eq!(shape_of(&roots), Needs::Roots);
    // Anything else under `mcp` is not a request this face relays: a text ask.
    let other = ask(None, Some(json!({"mcp": {"method": "tools/call"}})));
    assert_eq!(shape_of(&other), Needs::Elicitation);
}

fn shape_of(entry: &Entry) -> Needs {
    shape(entry).needs()
}
