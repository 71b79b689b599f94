//! What a hostile child, stream or model origin cannot get: the environment, the terminal, keys
//! sent elsewhere.

mod environ;
mod hostile_stream;
mod model_origin;
