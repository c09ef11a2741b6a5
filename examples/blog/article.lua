--[[
blog.article: the measurements of the article "How to model and partition
data on Azure Cosmos DB using a real-world example" (Azure Cosmos DB
documentation), made on the hosted service with 100,000 users, 5 to 50
posts per user, up to 25 comments and 100 likes per post.

requests[R][model] = {latency in ms, request units}
]]

return {
  source = "How to model and partition data on Azure Cosmos DB using a " ..
    "real-world example",
  requests = {
    C1 = { V1 = { 7, 5.71 },    V2 = { 7, 5.71 },    V3 = { 7, 5.71 } },
    Q1 = { V1 = { 2, 1 },       V2 = { 2, 1 },       V3 = { 2, 1 } },
    C2 = { V1 = { 9, 8.76 },    V2 = { 9, 8.76 },    V3 = { 9, 8.76 } },
    Q2 = { V1 = { 9, 19.54 },   V2 = { 2, 1 },       V3 = { 2, 1 } },
    Q3 = { V1 = { 130, 619.41 }, V2 = { 28, 201.54 }, V3 = { 4, 6.46 } },
    C3 = { V1 = { 7, 8.57 },    V2 = { 7, 15.27 },   V3 = { 7, 15.27 } },
    Q4 = { V1 = { 23, 27.72 },  V2 = { 4, 7.72 },    V3 = { 4, 7.72 } },
    C4 = { V1 = { 6, 7.05 },    V2 = { 7, 14.67 },   V3 = { 7, 14.67 } },
    Q5 = { V1 = { 59, 58.92 },  V2 = { 4, 8.92 },    V3 = { 4, 8.92 } },
    Q6 = { V1 = { 306, 2063.54 }, V2 = { 83, 532.33 }, V3 = { 9, 16.97 } },
  },
  -- "we denormalized posts at a cost of about 10 RU per item"
  copy_ru = 10,
}
