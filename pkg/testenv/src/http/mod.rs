//! The HTTP layer: the two faces (an in-process `tower::Service` and a loopback
//! server), routing of requests to verbs, request options and bodies, lists, watches,
//! discovery, server-side printing, admission webhooks, authentication and
//! impersonation, and the testing hooks. It turns
//! requests into calls on the [registry](crate::registry), and their results into
//! responses.

mod admission;
pub(crate) mod authentication;
mod body;
mod continue_token;
mod conversion;
mod discovery;
mod handler;
mod impersonation;
mod list;
mod openapi;
mod proto;
mod reply;
mod request;
mod request_options;
mod route;
pub(crate) mod server;
pub(crate) mod service;
mod table;
mod watch;
mod watch_buffer;
mod webhook_client;
