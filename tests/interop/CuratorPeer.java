// SPDX-License-Identifier: MIT
// CuratorPeer.java - Apache Curator's InterProcessMutex and
// InterProcessSemaphoreV2 (Debian's libcurator-*-java), driven by
// test_zk_interop, which compiles it with javac at test time.
//
// usage: java CuratorPeer HOST:PORT
// Prints "ready" once connected, then reads commands on stdin, one a line,
// and answers each with one line:
//   try PATH            "acquired" (then releases) or "busy"
//   hold PATH           acquires (waiting up to 20 s): "held" or "timeout"
//   release             releases what hold took: "released"
//   semtry PATH N       one lease of N without waiting: "acquired" (then
//                       returns it) or "busy"
//   semhold PATH N      one lease of N, waiting up to 20 s: "held" or "timeout"
//   semrelease          returns it: "released"
//   quit
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.concurrent.TimeUnit;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.recipes.locks.InterProcessSemaphoreV2;
import org.apache.curator.framework.recipes.locks.Lease;
import org.apache.curator.retry.RetryNTimes;

public class CuratorPeer {
    public static void main(String[] args) throws Exception {
        CuratorFramework cf =
            CuratorFrameworkFactory.newClient(args[0], 30000, 10000, new RetryNTimes(3, 100));
        cf.start();
        if (!cf.blockUntilConnected(20, TimeUnit.SECONDS)) {
            System.out.println("no connection");
            System.exit(1);
        }
        System.out.println("ready");
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        InterProcessMutex held = null;
        Lease lease = null;
        String line;
        while ((line = in.readLine()) != null) {
            String[] w = line.trim().split(" ");
            String answer;
            switch (w[0]) {
            case "try": {
                InterProcessMutex m = new InterProcessMutex(cf, w[1]);
                if (m.acquire(0, TimeUnit.MILLISECONDS)) {
                    answer = "acquired";
                    m.release();
                } else {
                    answer = "busy";
                }
                break;
            }
            case "hold":
                held = new InterProcessMutex(cf, w[1]);
                answer = held.acquire(20, TimeUnit.SECONDS) ? "held" : "timeout";
                break;
            case "release":
                held.release();
                answer = "released";
                break;
            case "semtry": {
                InterProcessSemaphoreV2 s =
                    new InterProcessSemaphoreV2(cf, w[1], Integer.parseInt(w[2]));
                Lease l = s.acquire(0, TimeUnit.MILLISECONDS);
                answer = l != null ? "acquired" : "busy";
                if (l != null)
                    s.returnLease(l);
                break;
            }
            case "semhold": {
                InterProcessSemaphoreV2 s =
                    new InterProcessSemaphoreV2(cf, w[1], Integer.parseInt(w[2]));
                lease = s.acquire(20, TimeUnit.SECONDS);
                answer = lease != null ? "held" : "timeout";
                break;
            }
            case "semrelease":
                lease.close();
                answer = "released";
                break;
            case "quit":
                cf.close();
                return;
            default:
                answer = "unknown command";
            }
            System.out.println(answer);
            System.out.flush();
        }
        cf.close();
    }
}
