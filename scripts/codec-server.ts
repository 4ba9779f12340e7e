/**
 * `npm run codec-server`: the codec server for the Temporal web UI and CLI, with the
 * worker's keys (STERNA_CODEC_KEYS / STERNA_CODEC_KEYS_FILE / ~/.config/sterna/codec-keys).
 *
 *   STERNA_CODEC_SERVER_PORT     8234
 *   STERNA_CODEC_SERVER_HOST     127.0.0.1 (anything else needs a token)
 *   STERNA_CODEC_SERVER_TOKEN    when set, required as `Authorization: Bearer <token>`
 *   STERNA_CODEC_CORS_ORIGINS    the web UI's origins, comma-separated
 *                                (default http://127.0.0.1:8233,http://localhost:8233)
 */
import { codecServerConfig } from '../config/codec-server-config';
import { startCodecServer } from '../codec/server';
import { sternaPayloadCodec } from '../codec/data-converter';

async function main(): Promise<void> {
  const config = codecServerConfig();
  const server = await startCodecServer({ codec: sternaPayloadCodec(), ...config });
  console.log(`codec server at ${server.url} (CORS: ${config.corsOrigins.join(', ')}; ${config.token ? 'bearer token required' : 'no token: loopback only'})`);
  console.log(`web UI: temporal server start-dev --ui-codec-endpoint ${server.url}   CLI: temporal workflow show --codec-endpoint ${server.url}${config.token ? ' --codec-auth "Bearer $STERNA_CODEC_SERVER_TOKEN"' : ''}`);
  const stop = () => void server.close().then(() => process.exit(0));
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
}

main().catch((err: Error) => {
  console.error(err.message);
  process.exit(1);
});
