/** The codec server's settings from the environment, checked once with every bad variable named. */
import { z } from 'zod';

export const DEFAULT_CODEC_SERVER_PORT = 8234;

const Env = z.object({
  STERNA_CODEC_SERVER_PORT: z.coerce.number().int().min(0).max(65535).default(DEFAULT_CODEC_SERVER_PORT),
  STERNA_CODEC_SERVER_HOST: z.string().min(1).default('127.0.0.1'),
  STERNA_CODEC_SERVER_TOKEN: z.string().min(16, 'at least 16 characters, e.g. from `openssl rand -hex 24`').optional(),
  STERNA_CODEC_CORS_ORIGINS: z
    .string()
    .default('http://127.0.0.1:8233,http://localhost:8233')
    .transform((list) => list.split(',').map((o) => o.trim()).filter(Boolean))
    .pipe(z.array(z.url({ protocol: /^https?$/, error: 'origins such as http://127.0.0.1:8233, comma-separated' }))),
});

export interface CodecServerConfig {
  port: number;
  host: string;
  token?: string;
  corsOrigins: string[];
}

export function codecServerConfig(env: NodeJS.ProcessEnv = process.env): CodecServerConfig {
  const parsed = Env.safeParse(env);
  if (!parsed.success) throw new Error(`invalid codec server configuration: ${parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`);
  const e = parsed.data;
  return { port: e.STERNA_CODEC_SERVER_PORT, host: e.STERNA_CODEC_SERVER_HOST, token: e.STERNA_CODEC_SERVER_TOKEN, corsOrigins: e.STERNA_CODEC_CORS_ORIGINS };
}
