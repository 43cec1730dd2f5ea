//! The webhook endpoints in the OpenAPI document ([`crate::http::v2`]'s `webhooks`):
//! registration (201), listing, deletion (204), the delivery log and the test delivery.

use serde_json::{Value, json};
use usage_core::alerts::{self, EventType, MAX_WEBHOOKS};

use super::{Endpoint as Doc, JSON};
use crate::error::Code;

/// The operations that answer another success status than 200 (no body for 204).
pub(super) const STATUS: &[(&str, u16)] = &[("CreateWebhook", 201), ("DeleteWebhook", 204)];

/// The webhook endpoints.
pub(super) fn endpoints() -> Vec<Doc> {
    let names: Vec<&str> = EventType::SUBSCRIBABLE.iter().map(|e| e.name()).collect();
    let time = json!({"type": "string", "format": "date-time"});
    let nullable_time = json!({"type": ["string", "null"], "format": "date-time"});
    let webhook = |secret: bool| {
        let mut required = vec!["id", "url", "events", "thresholds", "created"];
        let mut v = json!({
            "type": "object",
            "properties": {
                "id": {"type": "string"},
                "url": {"type": "string"},
                "events": {"type": "array", "items": {"type": "string", "enum": names}},
                "thresholds": {"type": "array", "items": {"type": "integer", "minimum": alerts::THRESHOLD_RANGE.start(), "maximum": alerts::THRESHOLD_RANGE.end()}},
                "created": time,
            },
        });
        if secret {
            v["properties"]["secret"] = json!({"type": "string", "pattern": "^whsec_[A-Za-z0-9+/]{43}=$", "description": "The signing secret, shown only here."});
            required.push("secret");
        }
        v["required"] = json!(required);
        v
    };
    let list = |item: Value| {
        json!({"type": "object", "required": ["data", "next_cursor"], "properties": {
            "data": {"type": "array", "items": item},
            "next_cursor": {"type": "null"},
        }})
    };
    let errors = |extra: &[Code]| {
        [
            vec![
                Code::Unauthenticated,
                Code::PermissionDenied,
                Code::ResourceExhausted,
                Code::Unavailable,
            ],
            extra.to_vec(),
        ]
        .concat()
    };
    let id_param = json!({"name": "id", "in": "path", "required": true, "schema": {"type": "string", "minLength": 1}, "description": "The webhook's id."});
    let write = "Extension. Key: `Authorization: Bearer` with `billing-write`.";
    let read = "Extension. Key: `Authorization: Bearer` with `billing-read`.";
    vec![
        Doc {
            path: "/api/v2/webhooks".into(),
            methods: &["get"],
            operation_id: "ListWebhooks".into(),
            tag: "billing",
            summary: "The team's webhooks, without their secrets.".into(),
            description: format!("{read} Oldest first; a team has at most {MAX_WEBHOOKS}."),
            request: None,
            ok: list(webhook(false)),
            errors: errors(&[]),
            media_type: JSON,
            also: vec![],
            parameters: vec![],
        },
        Doc {
            path: "/api/v2/webhooks".into(),
            methods: &["post"],
            operation_id: "CreateWebhook".into(),
            tag: "billing",
            summary: "Registers a webhook; answers 201 with its secret, shown only here.".into(),
            description: format!(
                "{write} `url`: `https` (or `http` with `serve --webhook-allow-private`), never \
                 a loopback, private, link-local, unspecified, multicast or broadcast address \
                 literal (400 at `url` naming the rule); names are checked at each delivery. \
                 `events` defaults to all of them, `thresholds` (percent of the cap) to \
                 [80, 100]. At most {MAX_WEBHOOKS} a team (400 `too_many`)."
            ),
            request: Some(json!({
                "type": "object",
                "required": ["url"],
                "additionalProperties": false,
                "properties": {
                    "url": {"type": "string", "minLength": 1, "maxLength": crate::webhooks::address::MAX_URL_BYTES},
                    "events": {"type": "array", "minItems": 1, "items": {"type": "string", "enum": names}},
                    "thresholds": {"type": "array", "minItems": 1, "items": {"type": "integer", "minimum": alerts::THRESHOLD_RANGE.start(), "maximum": alerts::THRESHOLD_RANGE.end()}},
                },
            })),
            ok: webhook(true),
            errors: errors(&[
                Code::InvalidArgument,
                Code::PayloadTooLarge,
                Code::UnsupportedMediaType,
            ]),
            media_type: JSON,
            also: vec![],
            parameters: vec![],
        },
        Doc {
            path: "/api/v2/webhooks/{id}".into(),
            methods: &["delete"],
            operation_id: "DeleteWebhook".into(),
            tag: "billing",
            summary: "Removes a webhook, its pending events and its log (204).".into(),
            description: format!("{write} 404 for an id the team lacks."),
            request: None,
            ok: json!({}),
            errors: errors(&[Code::NotFound]),
            media_type: JSON,
            also: vec![],
            parameters: vec![id_param.clone()],
        },
        Doc {
            path: "/api/v2/webhooks/{id}/deliveries".into(),
            methods: &["get"],
            operation_id: "WebhookDeliveries".into(),
            tag: "billing",
            summary: "The webhook's last 100 events and their delivery, newest first.".into(),
            description: format!("{read} 404 for an id the team lacks."),
            request: None,
            ok: list(json!({
                "type": "object",
                "required": ["event_id", "type", "created", "attempts", "last_status", "last_error", "next_attempt", "delivered"],
                "properties": {
                    "event_id": {"type": "string", "description": "The `webhook-id` of every attempt."},
                    "type": {"type": "string"},
                    "created": time,
                    "attempts": {"type": "integer", "minimum": 0},
                    "last_status": {"type": ["integer", "null"]},
                    "last_error": {"type": ["string", "null"]},
                    "next_attempt": nullable_time,
                    "delivered": nullable_time,
                },
            })),
            errors: errors(&[Code::NotFound]),
            media_type: JSON,
            also: vec![],
            parameters: vec![id_param.clone()],
        },
        Doc {
            path: "/api/v2/webhooks/{id}/test".into(),
            methods: &["post"],
            operation_id: "TestWebhook".into(),
            tag: "billing",
            summary: "Sends a signed `webhook.test` event now; answers how it went.".into(),
            description: format!(
                "{write} Waits for the receiver (at most 10 s). 404 for an id the team lacks."
            ),
            request: None,
            ok: json!({
                "type": "object",
                "required": ["event_id", "delivered", "status", "error"],
                "properties": {
                    "event_id": {"type": "string"},
                    "delivered": {"type": "boolean", "description": "Whether the receiver answered 2xx."},
                    "status": {"type": ["integer", "null"]},
                    "error": {"type": ["string", "null"]},
                },
            }),
            errors: errors(&[Code::NotFound]),
            media_type: JSON,
            also: vec![],
            parameters: vec![id_param],
        },
    ]
}
