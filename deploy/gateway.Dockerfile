# syntax=docker/dockerfile:1.7
# CE REST gateway. Build from the repository root:
#   docker build -f deploy/gateway.Dockerfile -t ce-gateway .
# (deploy/compose.yaml does this). The process is the same as outside Docker:
#   node --import tsx apps/gateway/src/main.ts
FROM node:20-bookworm-slim

ENV NODE_ENV=production \
    PNPM_HOME=/pnpm \
    COREPACK_ENABLE_DOWNLOAD_PROMPT=0
WORKDIR /app
# pnpm at the exact version of package.json's packageManager field.
RUN corepack enable

# Dependencies first: this layer is rebuilt only when the lockfile changes.
COPY pnpm-lock.yaml pnpm-workspace.yaml package.json ./
RUN --mount=type=cache,id=pnpm,target=/pnpm/store pnpm fetch --frozen-lockfile

COPY packages ./packages
COPY apps/gateway ./apps/gateway
# The root project (ce-rest) is in the filter for tsx, which runs the TypeScript sources.
RUN --mount=type=cache,id=pnpm,target=/pnpm/store \
    pnpm install --offline --frozen-lockfile --filter "@ce/gateway..." --filter ce-rest

# Unprivileged; sites override with `user:` to their CE service account (shared-FS ownership).
USER node
EXPOSE 8443 8444
CMD ["node", "--max-old-space-size=256", "--import", "tsx", "apps/gateway/src/main.ts"]
