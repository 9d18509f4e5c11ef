# syntax=docker/dockerfile:1.7
# CE REST gateway. Build from the repository root:
#   docker build -f deploy/gateway.Dockerfile -t ce-gateway .
# (deploy/compose.yaml does this). The process is the same as outside Docker (`./ce start`,
# `pnpm --filter @ce/gateway start`): the bundled build apps/gateway/dist/main.js.

# --- build: dependencies and the bundle (scripts/build-app.ts) -----------------------------------
FROM node:20-bookworm-slim AS build
ENV PNPM_HOME=/pnpm COREPACK_ENABLE_DOWNLOAD_PROMPT=0
WORKDIR /app
# pnpm at the exact version of package.json's packageManager field.
RUN corepack enable
# Dependencies first: this layer is rebuilt only when the lockfile changes.
COPY pnpm-lock.yaml pnpm-workspace.yaml package.json ./
RUN --mount=type=cache,id=pnpm,target=/pnpm/store pnpm fetch --frozen-lockfile
COPY packages ./packages
COPY apps/gateway ./apps/gateway
COPY scripts/build-app.ts ./scripts/build-app.ts
# The root project (ce-rest) carries the bundler (tsup) and tsx.
RUN --mount=type=cache,id=pnpm,target=/pnpm/store \
    pnpm install --offline --frozen-lockfile --filter "@ce/gateway..." --filter ce-rest
RUN node --import tsx scripts/build-app.ts gateway

# --- runtime: the self-contained bundle only (no node_modules, no TypeScript loader) ----------
FROM node:20-bookworm-slim
ENV NODE_ENV=production
WORKDIR /app
COPY --from=build /app/apps/gateway/dist ./apps/gateway/dist
# Unprivileged; sites override with `user:` to their CE service account (shared-FS ownership).
USER node
EXPOSE 8443 8444
CMD ["node", "--max-old-space-size=256", "apps/gateway/dist/main.js"]
