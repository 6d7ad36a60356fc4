#!/usr/bin/env node
// bench/fs-http-peer.mjs PORT DIR: @modelcontextprotocol/server-filesystem
// served over Streamable HTTP instead of stdio, for bench/perf-goals.
//
// The package serves stdio only: its index.js builds an McpServer and calls
// server.connect(new StdioServerTransport()). This wrapper replaces
// McpServer.prototype.connect before loading index.js, so the very same
// server (same tools, same code path per call) is connected to the SDK's
// StreamableHTTPServerTransport (one stateful session, JSON responses)
// behind node:http on 127.0.0.1:PORT, path /mcp.
import { createServer } from 'node:http';
import { randomUUID } from 'node:crypto';
import { join, dirname } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', 'tests', 'node', 'node_modules');
const sdk = (p) => pathToFileURL(join(root, '@modelcontextprotocol', 'sdk', 'dist', 'esm', p)).href;
const { McpServer } = await import(sdk('server/mcp.js'));
const { StreamableHTTPServerTransport } = await import(sdk('server/streamableHttp.js'));

const [port, dir] = process.argv.slice(2);
const connect = McpServer.prototype.connect;
McpServer.prototype.connect = async function () {
  const t = new StreamableHTTPServerTransport({ sessionIdGenerator: () => randomUUID(), enableJsonResponse: true });
  await connect.call(this, t);
  const http = createServer(async (req, res) => {
    const chunks = [];
    for await (const c of req) chunks.push(c);
    const body = chunks.length ? JSON.parse(Buffer.concat(chunks).toString()) : undefined;
    await t.handleRequest(req, res, body);
  });
  http.keepAliveTimeout = 600000;
  await new Promise((r) => http.listen(Number(port), '127.0.0.1', r));
};
process.argv = [process.argv[0], 'mcp-server-filesystem', dir];
await import(pathToFileURL(join(root, '@modelcontextprotocol', 'server-filesystem', 'dist', 'index.js')).href);
