package io.kplug.sidecar;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The protocol's rules, as sidecar-sdk/conformance/rules.json states them (kplug-proto's own test
 * keeps the file equal to the operator's rules): one test per rule, and a test that fails when the
 * file has a rule this SDK does not check.
 */
class RulesTest {
  private static JsonNode rules;

  @BeforeAll
  static void read() throws IOException {
    Path file = Path.of(System.getProperty("kplug.root"), "sidecar-sdk/conformance/rules.json");
    rules = new ObjectMapper().readTree(file.toFile()).get("rules");
  }

  private static JsonNode rule(String name) {
    return rules.get(name);
  }

  private static List<String> strings(JsonNode array) {
    var out = new ArrayList<String>();
    array.forEach(n -> out.add(n.asText()));
    return out;
  }

  @Test
  void pluginName() {
    JsonNode rule = rule("plugin_name");
    assertEquals(rule.get("max_length").asInt(), Protocol.MAX_NAME_LENGTH);
    for (String valid : strings(rule.get("valid"))) {
      assertTrue(Info.isDnsLabel(valid), valid);
    }
    for (JsonNode invalid : rule.get("invalid")) {
      String name = invalid.get("name").asText();
      // Refused at start-up, before anything is bound.
      var e =
          assertThrows(
              StartupException.class,
              () -> PluginServer.builder(Info.builder(name).build(), r -> Response.ok()).build(),
              name);
      assertEquals(StartupException.Kind.INVALID_NAME, e.kind());
    }
  }

  @Test
  void reservedStatusKeys() {
    JsonNode rule = rule("reserved_status_keys");
    assertEquals(strings(rule.get("reserved")), Protocol.RESERVED_STATUS_KEYS);
    for (String key : strings(rule.get("reserved"))) {
      Response status = Response.ok().withStatus(Map.of(key, 1));
      assertTrue(status.problem().contains("key \"" + key + "\" is reserved for the operator"));
      KubeObject extension = KubeObject.decode("{\"kind\": \"E\"}".getBytes());
      Response ext = Response.ok().withExtensionStatus(extension, Map.of(key, 1));
      assertTrue(ext.problem().contains("key \"" + key + "\" is reserved for the operator"));
    }
    for (String key : strings(rule.get("allowed"))) {
      assertEquals(null, Response.ok().withStatus(Map.of(key, 1)).problem(), key);
    }
  }

  @Test
  void reservedConditionTypes() {
    JsonNode rule = rule("reserved_condition_types");
    assertEquals(strings(rule.get("reserved")), Protocol.RESERVED_CONDITION_TYPES);
    for (String type : strings(rule.get("reserved"))) {
      Response r = Response.ok().withCondition(type, ConditionStatus.TRUE, "R", "m");
      assertTrue(
          r.problem().contains("condition type \"" + type + "\" is reserved for the operator"));
    }
    for (String type : strings(rule.get("allowed"))) {
      assertEquals(
          null, Response.ok().withCondition(type, ConditionStatus.TRUE, "R", "m").problem());
    }
  }

  @Test
  void messageLimit() {
    assertEquals(
        rule("message_limit").get("max_plugin_message_bytes").asInt(), Protocol.MAX_MESSAGE_BYTES);
  }

  @Test
  void environment() throws StartupException {
    JsonNode rule = rule("environment");
    assertEquals(rule.at("/socket_dir/variable").asText(), Protocol.SOCKET_DIR_ENV);
    assertEquals(rule.at("/socket_dir/default").asText(), Protocol.DEFAULT_SOCKET_DIR);
    JsonNode interval = rule.get("heartbeat_interval");
    assertEquals(interval.get("variable").asText(), Protocol.HEARTBEAT_INTERVAL_ENV);
    assertEquals(seconds(interval.get("default_seconds")), Protocol.DEFAULT_HEARTBEAT_INTERVAL);
    assertEquals(Protocol.DEFAULT_HEARTBEAT_INTERVAL, PluginServer.intervalFromEnv("p", null));
    for (JsonNode valid : interval.get("valid")) {
      assertEquals(
          seconds(valid.get("seconds")),
          PluginServer.intervalFromEnv("p", valid.get("text").asText()),
          valid.toString());
    }
    for (String invalid : strings(interval.get("invalid"))) {
      var e =
          assertThrows(
              StartupException.class, () -> PluginServer.intervalFromEnv("p", invalid), invalid);
      assertEquals(StartupException.Kind.INVALID_CONFIG, e.kind());
      assertTrue(e.getMessage().contains(Protocol.HEARTBEAT_INTERVAL_ENV), e.getMessage());
    }
  }

  @Test
  void heartbeatBackoff() {
    JsonNode rule = rule("heartbeat_backoff");
    assertEquals(seconds(rule.get("initial_seconds")), Protocol.BACKOFF_INITIAL);
    assertEquals(rule.get("factor").asInt(), Protocol.BACKOFF_FACTOR);
    assertEquals(rule.get("jitter").asDouble(), Protocol.BACKOFF_JITTER);
    assertEquals(seconds(rule.get("default_cap_seconds")), Protocol.DEFAULT_HEARTBEAT_INTERVAL);
    assertEquals(seconds(rule.get("call_deadline_seconds")), Protocol.HEARTBEAT_TIMEOUT);
    double tolerance = rule.get("tolerance_seconds").asDouble();
    for (JsonNode sample : rule.get("samples")) {
      Duration delay =
          Heartbeater.backoffDelay(
              sample.get("attempt").asInt(),
              seconds(sample.get("cap_seconds")),
              sample.get("unit").asDouble());
      assertEquals(
          sample.get("delay_seconds").asDouble(),
          delay.toNanos() / 1e9,
          tolerance,
          sample.toString());
    }
  }

  @Test
  void socketDir() throws StartupException {
    JsonNode rule = rule("socket_dir");
    var origins = new ArrayList<String>();
    for (JsonNode sample : rule.get("samples")) {
      String name = sample.get("origin").asText();
      origins.add(name);
      SocketDirOrigin origin =
          java.util.Arrays.stream(SocketDirOrigin.values())
              .filter(o -> o.ruleName().equals(name))
              .findFirst()
              .orElseThrow();
      Path dir = Path.of(sample.get("socket_dir").asText());
      assertEquals(sample.get("waiting").asText(), origin.registryWaitingMessage(dir));
      assertEquals(sample.get("missing").asText(), origin.socketDirMissingMessage(dir));
    }
    assertEquals(List.of("default", "environment", "program"), origins);
    // Where the server says its socket dir came from.
    var builder = PluginServer.builder(Info.builder("rules").build(), r -> Response.ok());
    assertEquals(SocketDirOrigin.DEFAULT, builder.environment(v -> null).build().socketDirOrigin());
    assertEquals(SocketDirOrigin.DEFAULT, builder.environment(v -> "").build().socketDirOrigin());
    assertEquals(
        SocketDirOrigin.ENVIRONMENT,
        builder.environment(Map.of("KPLUG_SOCKET_DIR", "/tmp/k")::get).build().socketDirOrigin());
    assertEquals(
        SocketDirOrigin.PROGRAM, builder.socketDir(Path.of("/tmp/j")).build().socketDirOrigin());
  }

  private static Duration seconds(JsonNode n) {
    return Duration.ofNanos(Math.round(n.asDouble() * 1e9));
  }

  @Test
  void everyRuleIsChecked() {
    var all = new TreeSet<String>();
    rules.fieldNames().forEachRemaining(all::add);
    assertEquals(
        Set.of(
            "plugin_name",
            "reserved_status_keys",
            "reserved_condition_types",
            "message_limit",
            "environment",
            "heartbeat_backoff",
            "socket_dir"),
        all,
        "rules.json has rules this test does not check: add a test for each");
  }
}
