"""HTTP plumbing shared by the API packages: request bodies, HAL envelopes, paging, the
OpenAPI document and client addresses. It knows no domain."""
