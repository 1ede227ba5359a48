# syntax=docker/dockerfile:1

# Build a static binary of cmd/llmbot.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# The version the binary reports (llmbot --version, the "starting" log line), e.g.
# docker build --build-arg VERSION=$(git describe --tags --always) .
ARG VERSION=dev
RUN CGO_ENABLED=0 GOOS=linux go build -trimpath -ldflags="-s -w -X main.version=${VERSION}" -o /out/llmbot ./cmd/llmbot

# Run it as a non-root user on an image with nothing else in it (CA certificates and tzdata only).
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/llmbot /usr/local/bin/llmbot
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/llmbot"]
