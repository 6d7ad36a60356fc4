/*
 * HTTP routes of the custom-skills and A2A parts (src/server/custom_rest.c,
 * src/server/a2a_http.c), kept out of http.h so those files merge apart.
 * routes.c lists them in the route table.
 */
#ifndef SKILLD_SERVER_CUSTOM_HTTP_H
#define SKILLD_SERVER_CUSTOM_HTTP_H

#include "server/a2a.h"
#include "server/http.h"

/* POST /v1/skills: register a manifest ({...} or {"manifest": {...},
 * "replace": bool}); 201 with the skill. */
void skd__rest_skill_register(skd_http_req *req, skd_http_reply *out);
/* DELETE /v1/skills/{name[@version]}: 204. */
void skd__rest_skill_delete(skd_http_req *req, skd_http_reply *out);
/* PATCH /v1/skills/{name[@version]} {"enabled": bool}: 200 with the skill. */
void skd__rest_skill_patch(skd_http_req *req, skd_http_reply *out);

/* GET /.well-known/agent-card.json, GET /.well-known/agent.json, POST /a2a. */
void skd__a2a_http_card(skd_http_req *req, skd_http_reply *out);
void skd__a2a_http_card_legacy(skd_http_req *req, skd_http_reply *out);
void skd__a2a_http_post(skd_http_req *req, skd_http_reply *out);

/* The server's A2A service (http.c). Borrowed. */
skd_a2a *skd__server_a2a(skd_server *s);

#endif
